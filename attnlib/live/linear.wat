;; The one WebAssembly kernel of chapter 13's browser model: a linear layer, y = x @ W.T + b,
;; with 128-bit SIMD (four float32 lanes at a time).
;;
;; linear(x, n, inputs, w, b, outputs, y) takes byte addresses in the exported memory:
;;   x (n, inputs), w (outputs, inputs) as torch.nn.Linear stores it, b (outputs,), y (n, outputs),
;;   all float32, row-major. n and inputs must be multiples of 4 (imdb.js pads the rows of x).
;; Four rows of x at a time, one output at a time, so each row of w is read once per four rows:
;; four accumulators of four lanes each; every output adds its accumulator's lanes in order
;; (lane 0 + 1 + 2 + 3), then the bias.
;;
;; Assembled by wabt's wat2wasm (`npm run wasm`, pinned in package.json) into linear.wasm, which is
;; committed: Python (attnlib/live/wasm.py) and the page read those bytes, and a test
;; (tests/test_live_imdb.py) checks that assembling this file again gives them exactly.
(module
  (memory (export "memory") 1)

  (func (export "linear")
    (param $x i32) (param $n i32) (param $inputs i32) (param $w i32) (param $b i32)
    (param $outputs i32) (param $y i32)
    (local $row i32)        ;; the first of the four rows of x in hand
    (local $out i32)        ;; the output being computed
    (local $rowBytes i32)   ;; inputs * 4: one row of x or of w
    (local $outBytes i32)   ;; outputs * 4: one row of y
    (local $wp i32)         ;; walks along row $out of w ...
    (local $wEnd i32)       ;; ... up to here
    (local $x0 i32) (local $x1 i32) (local $x2 i32) (local $x3 i32)  ;; walk along the four rows
    (local $yp i32)         ;; where the next sum goes in y
    (local $bias i32)       ;; the address of b[$out]
    (local $acc0 v128) (local $acc1 v128) (local $acc2 v128) (local $acc3 v128)
    (local $wv v128)        ;; four weights

    (local.set $rowBytes (i32.shl (local.get $inputs) (i32.const 2)))
    (local.set $outBytes (i32.shl (local.get $outputs) (i32.const 2)))
    (local.set $row (i32.const 0))
    (block $rowsDone
      (loop $eachRow
        (br_if $rowsDone (i32.ge_u (local.get $row) (local.get $n)))
        (local.set $out (i32.const 0))
        (block $outputsDone
          (loop $eachOutput
            (br_if $outputsDone (i32.ge_u (local.get $out) (local.get $outputs)))
            (local.set $acc0 (f32x4.splat (f32.const 0)))
            (local.set $acc1 (f32x4.splat (f32.const 0)))
            (local.set $acc2 (f32x4.splat (f32.const 0)))
            (local.set $acc3 (f32x4.splat (f32.const 0)))
            ;; x0..x3: rows $row..$row+3 of x; wp..wEnd: row $out of w
            (local.set $x0
              (i32.add (local.get $x) (i32.mul (local.get $row) (local.get $rowBytes))))
            (local.set $x1 (i32.add (local.get $x0) (local.get $rowBytes)))
            (local.set $x2 (i32.add (local.get $x1) (local.get $rowBytes)))
            (local.set $x3 (i32.add (local.get $x2) (local.get $rowBytes)))
            (local.set $wEnd
              (i32.add
                (local.tee $wp
                  (i32.add (local.get $w) (i32.mul (local.get $out) (local.get $rowBytes))))
                (local.get $rowBytes)))
            ;; acc_k += x_k[i:i+4] * w[i:i+4], four inputs a step
            (block $dotDone
              (loop $dot
                (br_if $dotDone (i32.ge_u (local.get $wp) (local.get $wEnd)))
                (local.set $wv (v128.load (local.get $wp)))
                (local.set $acc0
                  (f32x4.add (local.get $acc0)
                    (f32x4.mul (v128.load (local.get $x0)) (local.get $wv))))
                (local.set $acc1
                  (f32x4.add (local.get $acc1)
                    (f32x4.mul (v128.load (local.get $x1)) (local.get $wv))))
                (local.set $acc2
                  (f32x4.add (local.get $acc2)
                    (f32x4.mul (v128.load (local.get $x2)) (local.get $wv))))
                (local.set $acc3
                  (f32x4.add (local.get $acc3)
                    (f32x4.mul (v128.load (local.get $x3)) (local.get $wv))))
                (local.set $wp (i32.add (local.get $wp) (i32.const 16)))
                (local.set $x0 (i32.add (local.get $x0) (i32.const 16)))
                (local.set $x1 (i32.add (local.get $x1) (i32.const 16)))
                (local.set $x2 (i32.add (local.get $x2) (i32.const 16)))
                (local.set $x3 (i32.add (local.get $x3) (i32.const 16)))
                (br $dot)))
            ;; y[$row + k, $out] = (lanes of acc_k, added in order) + b[$out], k = 0..3
            (local.set $bias (i32.add (local.get $b) (i32.shl (local.get $out) (i32.const 2))))
            (local.set $yp
              (i32.add (local.get $y)
                (i32.shl
                  (i32.add (i32.mul (local.get $row) (local.get $outputs)) (local.get $out))
                  (i32.const 2))))
            (f32.store (local.get $yp)
              (f32.add
                (f32.add
                  (f32.add
                    (f32.add (f32x4.extract_lane 0 (local.get $acc0))
                      (f32x4.extract_lane 1 (local.get $acc0)))
                    (f32x4.extract_lane 2 (local.get $acc0)))
                  (f32x4.extract_lane 3 (local.get $acc0)))
                (f32.load (local.get $bias))))
            (local.set $yp (i32.add (local.get $yp) (local.get $outBytes)))
            (f32.store (local.get $yp)
              (f32.add
                (f32.add
                  (f32.add
                    (f32.add (f32x4.extract_lane 0 (local.get $acc1))
                      (f32x4.extract_lane 1 (local.get $acc1)))
                    (f32x4.extract_lane 2 (local.get $acc1)))
                  (f32x4.extract_lane 3 (local.get $acc1)))
                (f32.load (local.get $bias))))
            (local.set $yp (i32.add (local.get $yp) (local.get $outBytes)))
            (f32.store (local.get $yp)
              (f32.add
                (f32.add
                  (f32.add
                    (f32.add (f32x4.extract_lane 0 (local.get $acc2))
                      (f32x4.extract_lane 1 (local.get $acc2)))
                    (f32x4.extract_lane 2 (local.get $acc2)))
                  (f32x4.extract_lane 3 (local.get $acc2)))
                (f32.load (local.get $bias))))
            (local.set $yp (i32.add (local.get $yp) (local.get $outBytes)))
            (f32.store (local.get $yp)
              (f32.add
                (f32.add
                  (f32.add
                    (f32.add (f32x4.extract_lane 0 (local.get $acc3))
                      (f32x4.extract_lane 1 (local.get $acc3)))
                    (f32x4.extract_lane 2 (local.get $acc3)))
                  (f32x4.extract_lane 3 (local.get $acc3)))
                (f32.load (local.get $bias))))
            (local.set $yp (i32.add (local.get $yp) (local.get $outBytes)))
            (local.set $out (i32.add (local.get $out) (i32.const 1)))
            (br $eachOutput)))
        (local.set $row (i32.add (local.get $row) (i32.const 4)))
        (br $eachRow)))))

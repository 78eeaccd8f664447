// ESLint (flat config) for the browser JavaScript of attnlib/live/; `make lint` runs it.
// The files are classic scripts: an IIFE each, "use strict" inside, inlined into the page by
// attnlib/live/__init__.py, and loaded by node in the tests through module.exports.
import js from "@eslint/js";
import globals from "globals";

export default [
  {
    // JavaScript that is not ours: the virtualenv's Jupyter, the built book, fetched assets.
    ignores: [".venv/", "_build/", "book_assets/", "**/*.egg-info/"],
  },
  js.configs.recommended,
  {
    files: ["attnlib/live/**/*.js"],
    languageOptions: {
      // ES2017: what the explorers promise the reader's browser.
      ecmaVersion: 2017,
      sourceType: "script",
      globals: {
        ...globals.browser,
        // node's, used only where `typeof module === "object"` says the file runs in node
        module: "readonly",
        require: "readonly",
      },
    },
    rules: {
      // Bugs that `var` code invites and the recommended set lets through.
      "block-scoped-var": "error",
      "no-loop-func": "error",
      "no-shadow": "error",
      eqeqeq: "error",
      "no-implicit-globals": "error",
      radix: "error",
      "no-throw-literal": "error",
    },
  },
  {
    // The tokenizer's regular expressions use Unicode property escapes (\p{...}): ES2018.
    files: ["attnlib/live/imdb.js"],
    languageOptions: { ecmaVersion: 2018 },
  },
  {
    files: ["eslint.config.mjs"],
    languageOptions: { sourceType: "module" },
  },
];

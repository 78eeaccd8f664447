"""Fetch the JavaScript the book serves itself, so that it renders offline.

The book (``book.yml``) draws saved widget state with ``@jupyter-widgets/html-manager``
(which needs ``require.js``) and typesets math with MathJax 3. By default the pages would load
all three from CDNs; instead this script downloads pinned versions from the npm registry with
``npm pack`` and lays them out in ``book_assets/`` (git-ignored), which ``book.yml`` serves
through ``html_static_path``:

    book_assets/widgets/require.js       requirejs
    book_assets/widgets/embed-amd.js     html-manager (base, controls and output built in)
    book_assets/widgets/*.woff2 ...      the icon fonts embed-amd.js loads next to itself
    book_assets/widgets/mathjax3-compat.js  written here: lets html-manager typeset with MathJax 3
    book_assets/mathjax/tex-chtml.js     MathJax 3 (its es5/ folder, minus unused bundles)

Run it from anywhere: ``python scripts/fetch_book_assets.py [--force]``. It does nothing when
``book_assets/.stamp`` already names the pinned versions. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "book_assets"
STAMP_NAME = ".stamp"
LAYOUT_VERSION = 1  # bump when the layout below changes, so old folders are rebuilt

# MathJax es5 files that the book never loads: other combined bundles, the Node entry point and
# latest.js, which fetches MathJax from a CDN.
MATHJAX_SKIP = {
    "latest.js",
    "node-main.js",
    "mml-chtml.js",
    "mml-svg.js",
    "tex-chtml-full-speech.js",
    "tex-chtml-full.js",
    "tex-mml-chtml.js",
    "tex-mml-svg.js",
    "tex-svg-full.js",
    "tex-svg.js",
}
WIDGET_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")


@dataclass(frozen=True)
class Package:
    """One pinned npm package and the part of it the book needs."""

    name: str
    version: str
    target: str  # folder under book_assets/

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


PACKAGES = (
    Package("@jupyter-widgets/html-manager", "1.0.15", "widgets"),
    Package("requirejs", "2.3.8", "widgets"),
    Package("mathjax", "3.2.2", "mathjax"),
)
# html-manager typesets widget labels with the MathJax 2 call
# MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the book loads MathJax 3, which has no
# Hub, so every widget label raised a TypeError. This maps the call onto MathJax 3.
COMPAT_NAME = "widgets/mathjax3-compat.js"
COMPAT_JS = r"""// Written by scripts/fetch_book_assets.py.
// The widget manager (html-manager) typesets labels with MathJax 2's
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); this book loads MathJax 3, which has
// no Hub and, as Sphinx configures it, no $...$ delimiters. Map that call onto MathJax 3:
// rewrite the label's $...$ and $$...$$ as \(...\) and \[...\], then typeset it.
(function () {
  "use strict";
  function useMathJax3Delimiters(element) {
    var walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    var node;
    while ((node = walker.nextNode())) {
      if (node.nodeValue.indexOf("$") >= 0) {
        node.nodeValue = node.nodeValue
          .replace(/\$\$([^$]+)\$\$/g, "\\[$1\\]")
          .replace(/\$([^$]+)\$/g, "\\($1\\)");
      }
    }
  }
  function install() {
    var mj = window.MathJax;
    if (!mj || !mj.version || mj.Hub || !mj.startup) {
      return;
    }
    mj.Hub = {
      Queue: function (command) {
        var element = command && command[2];
        if (!element || !element.nodeType) {
          return;
        }
        useMathJax3Delimiters(element);
        mj.startup.promise = mj.startup.promise
          .then(function () {
            return mj.typesetPromise([element]);
          })
          .catch(function (error) {
            console.warn("MathJax could not typeset a widget label", error);
          });
      },
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
// html-manager asks require.js for its icon fonts under "@jupyter-widgets/html-manager/dist/",
// which would resolve next to each page; point that prefix at this folder, where they are.
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  if (here && window.require && window.require.config) {
    var folder = here.split("?")[0].replace(/\/[^/]*$/, "");
    window.require.config({ paths: { "@jupyter-widgets/html-manager/dist": folder } });
  }
})();
"""
# Files that must exist afterwards; book.yml and tests/book refer to them.
REQUIRED = ("widgets/require.js", "widgets/embed-amd.js", COMPAT_NAME, "mathjax/tex-chtml.js")


def stamp_text() -> str:
    """The stamp content: the pinned versions and the layout version."""
    pins = {package.name: package.version for package in PACKAGES}
    compat = hashlib.sha256(COMPAT_JS.encode()).hexdigest()
    stamp = {"layout": LAYOUT_VERSION, "packages": pins, "compat_sha256": compat}
    return json.dumps(stamp, indent=2, sort_keys=True)


def up_to_date(folder: Path) -> bool:
    """True when ``folder`` was made by this script with the same pins."""
    stamp = folder / STAMP_NAME
    if not stamp.is_file() or stamp.read_text(encoding="utf-8") != stamp_text():
        return False
    return all((folder / name).is_file() for name in REQUIRED)


def npm_pack(packages: tuple[Package, ...], dest: Path) -> dict[str, Path]:
    """Download the packages' tarballs into ``dest``; map package name to tarball."""
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("fetch_book_assets: npm not found; install Node.js (it ships npm).")
    command = [npm, "pack", "--json", "--pack-destination", str(dest)]
    command += [package.spec for package in packages]
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=dest)
    if result.returncode != 0:
        sys.exit(f"fetch_book_assets: {' '.join(command)} failed:\n{result.stderr}")
    packed = json.loads(result.stdout)
    return {entry["name"]: dest / entry["filename"] for entry in packed}


def wanted(package: Package, path: PurePosixPath) -> PurePosixPath | None:
    """Where ``path`` (inside the tarball's package/ folder) goes, or None to skip it."""
    if path.name.startswith("LICENSE"):
        return PurePosixPath(f"{path.name}.{package.name.rsplit('/', 1)[-1]}")
    if package.name == "requirejs":
        return PurePosixPath(path.name) if str(path) == "require.js" else None
    if package.name == "mathjax":
        if path.parts[0] != "es5" or str(path.relative_to("es5")) in MATHJAX_SKIP:
            return None
        return path.relative_to("es5")
    if path.parent == PurePosixPath("dist"):
        if path.name == "embed-amd.js" or path.suffix in WIDGET_SUFFIXES:
            return PurePosixPath(path.name)
    return None


def extract(package: Package, tarball: Path, dest: Path) -> int:
    """Copy the wanted regular files of ``tarball`` under ``dest/target``; return their count."""
    count = 0
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            path = PurePosixPath(member.name)
            if not member.isfile() or path.parts[0] != "package" or ".." in path.parts:
                continue
            relative = wanted(package, path.relative_to("package"))
            if relative is None:
                continue
            out = dest / package.target / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None  # a regular file always has content
            out.write_bytes(source.read())
            count += 1
    return count


def build(folder: Path) -> None:
    """Fetch every package into a fresh copy of ``folder``, then swap it in."""
    with tempfile.TemporaryDirectory(prefix="book_assets_") as tmp:
        tarballs = npm_pack(PACKAGES, Path(tmp))
        staging = Path(tmp) / "book_assets"
        for package in PACKAGES:
            count = extract(package, tarballs[package.name], staging)
            print(f"fetch_book_assets: {package.spec}: {count} files")
        (staging / COMPAT_NAME).write_text(COMPAT_JS, encoding="utf-8")
        missing = [name for name in REQUIRED if not (staging / name).is_file()]
        if missing:
            sys.exit(f"fetch_book_assets: missing after download: {', '.join(missing)}")
        (staging / STAMP_NAME).write_text(stamp_text(), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)
        shutil.move(str(staging), folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="download even if up to date")
    parser.add_argument("--dest", type=Path, default=ASSETS, help="default: book_assets/")
    args = parser.parse_args(argv)
    if not args.force and up_to_date(args.dest):
        print(f"fetch_book_assets: {args.dest} is up to date")
        return 0
    build(args.dest)
    print(f"fetch_book_assets: wrote {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

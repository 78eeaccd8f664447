"""The IMDB loader on small archives made here, a local HTTP server, and the real archive."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import re
import shutil
import struct
import tarfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from attnlib.data import imdb
from attnlib.data.imdb import DatasetError, clean_review, load_imdb

SMALL = {"train/neg": 2, "train/pos": 3, "test/neg": 2, "test/pos": 2, "train/unsup": 4}
STARS = {"neg": [1, 4], "pos": [7, 10], "unsup": [0]}


def review_files(counts: dict[str, int] = SMALL) -> dict[str, bytes]:
    """Member name to content: a few reviews per folder, plus a README like the real archive."""
    files = {"aclImdb/README": b"Large Movie Review Dataset v1.0\n"}
    for folder, n in counts.items():
        label = folder.split("/")[1]
        for number in range(n):
            stars = STARS[label][number % len(STARS[label])]
            text = f"{folder} review {number}: Caf\u00e9 fun.<br /><br />The end."
            files[f"aclImdb/{folder}/{number}_{stars}.txt"] = text.encode()
    return files


def make_archive(path: Path, files: dict[str, bytes], extra: tuple = ()) -> Path:
    """A gzipped tar of ``files`` (in shuffled order) and extra hand-made members."""
    with tarfile.open(path, "w:gz") as archive:
        for name in sorted(files, key=lambda name: hashlib.md5(name.encode()).hexdigest()):
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            archive.addfile(info, io.BytesIO(files[name]))
        for info in extra:
            archive.addfile(info, io.BytesIO(b"x" * info.size) if info.size else None)
    return path


def load_small(source, cache_dir, **kwargs):
    """Load a small (unknown) archive: it warns that it is not one of the known two."""
    with pytest.warns(UserWarning, match="not one of the two known IMDB archives"):
        return load_imdb(source, cache_dir=cache_dir, progress=False, expected_counts=SMALL)


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    """Tests choose their sources and caches explicitly; the web is never reached."""
    monkeypatch.delenv("ATTNLIB_DATA", raising=False)
    monkeypatch.delenv("ATTNLIB_CACHE", raising=False)
    monkeypatch.setattr(imdb, "IMDB_URL", "http://127.0.0.1:9/nothing-listens-here")


@pytest.fixture
def small(tmp_path) -> Path:
    return make_archive(tmp_path / "small.tar.gz", review_files())


def test_happy_path(small, tmp_path):
    data = load_small(small, tmp_path / "cache")
    assert [len(data.train), len(data.test), len(data.unlabelled)] == [5, 4, 4]
    assert data.train.labels.dtype == np.int8 and data.train.ratings.dtype == np.int8
    assert data.train.labels.tolist() == [0, 0, 1, 1, 1]
    assert data.train.ratings.tolist() == [1, 4, 7, 10, 7]
    assert data.train.ids == ["neg/0_1", "neg/1_4", "pos/0_7", "pos/1_10", "pos/2_7"]
    assert (
        data.unlabelled.labels.tolist() == [-1] * 4 and data.unlabelled.ratings.tolist() == [0] * 4
    )
    assert data.test.texts[0] == "test/neg review 0: Caf\u00e9 fun.<br /><br />The end."
    assert repr(data.train) == "Reviews(5 texts: 3 positive, 2 negative, 0 unlabelled)"
    assert len(data.digest) == 64
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [
        f"imdb-archive-{hashlib.sha256(small.read_bytes()).hexdigest()}.cache"  # the full digest
    ]


def test_second_load_comes_from_the_cache(small, tmp_path, monkeypatch):
    first = load_small(small, tmp_path)
    monkeypatch.setattr(imdb, "_read_source", lambda *args: pytest.fail("read the archive again"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_imdb(small, cache_dir=tmp_path, progress=False, expected_counts=SMALL)
    assert again.digest == first.digest
    assert again.train.texts == first.train.texts and again.unlabelled.ids == first.unlabelled.ids
    np.testing.assert_array_equal(again.test.ratings, first.test.ratings)


def test_extracted_folder_gives_the_same_content(small, tmp_path):
    for name, content in review_files().items():
        (tmp_path / "extracted" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "extracted" / name).write_bytes(content)
    from_archive = load_small(small, tmp_path / "a")
    from_folder = load_small(tmp_path / "extracted", tmp_path / "b")
    from_inner_folder = load_small(tmp_path / "extracted" / "aclImdb", tmp_path / "c")
    assert from_archive.digest == from_folder.digest == from_inner_folder.digest


def test_counts_are_strict_by_default(small, tmp_path):
    with pytest.raises(DatasetError, match=r"2 reviews in aclImdb/train/neg/, expected 12,500"):
        load_imdb(small, cache_dir=tmp_path, progress=False)


@pytest.mark.parametrize(
    ("name", "algorithm"), [("aclImdb_v1.tar.gz", "md5"), ("aclImdb_v1-text.tar.gz", "sha256")]
)
def test_known_name_with_wrong_checksum_is_refused(tmp_path, name, algorithm):
    archive = make_archive(tmp_path / name, review_files())
    with pytest.raises(DatasetError, match=rf"{name} has {algorithm} [0-9a-f]+, but the known"):
        load_imdb(archive, cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


def test_known_checksum_is_accepted_silently_under_any_name(small, tmp_path, monkeypatch):
    monkeypatch.setattr(imdb, "TEXT_ARCHIVE_SHA256", hashlib.sha256(small.read_bytes()).hexdigest())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_imdb(small, cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
    assert [path.name for path in (tmp_path / "cache").iterdir()] == ["imdb-aclImdb_v1.cache"]


def test_truncated_archive_is_refused(small, tmp_path):
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(small.read_bytes()[: small.stat().st_size // 2])
    with pytest.raises(DatasetError, match=r"truncated.tar.gz is truncated or corrupt"):
        load_imdb(truncated, cache_dir=tmp_path, progress=False, expected_counts=SMALL)


def special_member(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def regular_member(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 3
    return info


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (
            regular_member("aclImdb/../../escape.txt"),
            "'aclImdb/../../escape.txt' would land outside",
        ),
        (regular_member("/etc/cron.d/job"), "'/etc/cron.d/job' would land outside"),
        (
            special_member("aclImdb/train/pos/9_9.txt", tarfile.SYMTYPE, "/etc/passwd"),
            "'aclImdb/train/pos/9_9.txt' is a symbolic link to '/etc/passwd'",
        ),
        (
            special_member("aclImdb/README2", tarfile.LNKTYPE, "aclImdb/README"),
            "'aclImdb/README2' is a hard link to 'aclImdb/README'",
        ),
        (special_member("aclImdb/dev", tarfile.CHRTYPE), "'aclImdb/dev' is a device"),
        (special_member("aclImdb/fifo", tarfile.FIFOTYPE), "'aclImdb/fifo' is a device"),
    ],
)
def test_unsafe_members_are_refused(tmp_path, member, message):
    archive = make_archive(tmp_path / "bad.tar.gz", review_files(), extra=(member,))
    with pytest.raises(DatasetError, match=f"bad.tar.gz: member {message}"):
        load_imdb(archive, cache_dir=tmp_path, progress=False, expected_counts=SMALL)


def test_archive_missing_a_split_is_refused(tmp_path):
    files = {k: v for k, v in review_files().items() if "/test/neg/" not in k}
    archive = make_archive(tmp_path / "partial.tar.gz", files)
    expected = r"0 reviews in aclImdb/test/neg/, expected 2 \(is a split missing\?\)"
    with pytest.raises(DatasetError, match=expected):
        load_imdb(archive, cache_dir=tmp_path, progress=False, expected_counts=SMALL)


def test_impossible_star_rating_is_refused(tmp_path):
    files = review_files()
    files["aclImdb/train/pos/7_3.txt"] = b"three stars is not positive"
    archive = make_archive(tmp_path / "stars.tar.gz", files)
    with pytest.raises(DatasetError, match=r"aclImdb/train/pos/7_3.txt has 3 stars"):
        load_imdb(archive, cache_dir=tmp_path, progress=False, expected_counts=SMALL)


def corrupt_payload(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[-10] ^= 0xFF
    path.write_bytes(bytes(blob))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (corrupt_payload, "its payload does not match its checksum"),
        (lambda p: p.write_bytes(p.read_bytes()[:-100]), "its payload has [0-9,]+ bytes, expected"),
        (lambda p: p.write_bytes(b"NOTACACHE" + p.read_bytes()[9:]), "magic bytes"),
        (lambda p: p.write_bytes(p.read_bytes()[:8] + b"\x63" + p.read_bytes()[9:]), "format 99"),
        (lambda p: p.write_bytes(b""), "magic bytes"),
        (lambda p: rewrite_header(p, p, source=[1]), "its header's source digests are not a JSON"),
    ],
)
def test_corrupt_cache_is_rebuilt_with_a_warning(small, tmp_path, damage, reason):
    first = load_small(small, tmp_path)
    (cache_file,) = tmp_path.glob("imdb-*.cache")
    damage(cache_file)
    with pytest.warns(UserWarning, match=rf"ignoring the IMDB cache .*{reason}"):
        rebuilt = load_small(small, tmp_path)
    assert rebuilt.digest == first.digest and rebuilt.train.texts == first.train.texts
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt cache is sound again
        again = load_imdb(small, cache_dir=tmp_path, progress=False, expected_counts=SMALL)
    assert again.digest == first.digest


def test_cache_written_atomically_leaves_no_temporary_files(small, tmp_path):
    load_small(small, tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        path.name for path in tmp_path.glob("imdb-*.cache")
    ) + ["small.tar.gz"]


def test_carried_cache_loads_without_the_archive(small, tmp_path, monkeypatch):
    monkeypatch.setattr(imdb, "TEXT_ARCHIVE_SHA256", hashlib.sha256(small.read_bytes()).hexdigest())
    first = load_imdb(small, cache_dir=tmp_path / "here", progress=False, expected_counts=SMALL)
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    small.unlink()
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path / "there"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        carried = load_imdb(progress=False, expected_counts=SMALL)  # no archive, no web
    assert carried.digest == first.digest


def test_cache_of_other_counts_is_refused_not_returned(small, tmp_path, monkeypatch):
    load_small(small, tmp_path)  # a cache written for SMALL counts
    monkeypatch.setattr(imdb, "_read_source", lambda *args: pytest.fail("read the archive again"))
    key = hashlib.sha256(small.read_bytes()).hexdigest()
    expected = (
        rf"the IMDB cache .*imdb-archive-{key}\.cache: 2 reviews in aclImdb/train/neg/, "
        r"expected 12,500; the cache was built from a source with these counts"
    )
    with pytest.raises(DatasetError, match=expected):
        load_imdb(small, cache_dir=tmp_path, progress=False)  # the default, real counts


def test_carried_cache_of_other_counts_is_refused(small, tmp_path, monkeypatch):
    monkeypatch.setattr(imdb, "TEXT_ARCHIVE_SHA256", hashlib.sha256(small.read_bytes()).hexdigest())
    load_imdb(small, cache_dir=tmp_path, progress=False, expected_counts=SMALL)
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    expected = r"imdb-aclImdb_v1\.cache: 2 reviews in aclImdb/train/neg/, expected 12,500"
    with pytest.raises(DatasetError, match=expected):
        load_imdb(progress=False)


def other_archive(tmp_path: Path) -> Path:
    """An archive with the same layout and counts as ``small`` but another review's text."""
    files = review_files()
    files["aclImdb/test/pos/0_7.txt"] = b"another archive, another text"
    return make_archive(tmp_path / "other.tar.gz", files)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rewrite_header(path: Path, target: Path, **changes) -> Path:
    """``path``'s cache written to ``target`` with header entries changed (None: removed)."""
    blob = path.read_bytes()
    version, size = struct.unpack_from("<II", blob, 8)
    header = json.loads(blob[16 : 16 + size])
    header.update(changes)
    encoded = json.dumps({k: v for k, v in header.items() if v is not None}).encode()
    payload = blob[16 + size :]
    target.write_bytes(blob[:8] + struct.pack("<II", version, len(encoded)) + encoded + payload)
    return target


# The fix every refusal of another source's cache ends with.
FIX = (
    r"To fix it, delete .*imdb-[-\w]+\.cache \(or the cache folder .*\) to rebuild it from the "
    r"source, or point ATTNLIB_CACHE \(or cache_dir\) at another folder$"
)


def test_cache_of_another_archive_under_this_key_is_refused(small, tmp_path):
    expected = load_small(small, tmp_path / "reference")
    load_small(other_archive(tmp_path), tmp_path / "cache")
    (other_cache,) = (tmp_path / "cache").glob("imdb-*.cache")
    key = sha256_of(small)
    renamed = other_cache.rename(tmp_path / "cache" / f"imdb-archive-{key}.cache")
    message = (
        rf"^the IMDB cache {re.escape(str(renamed))} holds the reviews of the archive with "
        rf"sha256 {other_cache.stem.removeprefix('imdb-archive-')}, not of "
        rf"{re.escape(str(small))} \(the archive with sha256 {key}\): was it renamed or copied\? "
    )
    with pytest.raises(DatasetError, match=message + FIX):
        load_imdb(small, cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
    renamed.unlink()  # the fix the message gives
    data = load_small(small, tmp_path / "cache")
    assert data.digest == expected.digest and data.test.texts == expected.test.texts


def test_another_archives_cache_renamed_to_the_known_key_is_refused(small, tmp_path, monkeypatch):
    load_small(other_archive(tmp_path), tmp_path)
    (other_cache,) = tmp_path.glob("imdb-*.cache")
    other_cache.rename(tmp_path / "imdb-aclImdb_v1.cache")
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    message = (
        r"imdb-aclImdb_v1\.cache holds the reviews of the archive with sha256 [0-9a-f]{64}, not "
        r"of the IMDB dataset \(one of the two known IMDB archives, key 'aclImdb_v1'\): was it "
        r"renamed or copied\? "
    )
    with pytest.raises(DatasetError, match=message + FIX):  # neither its reviews nor a download
        load_imdb(progress=False, expected_counts=SMALL)


def test_cache_of_an_archive_known_no_more_is_refused(small, tmp_path, monkeypatch):
    """Both known archives share one key: a cache built from one that is no longer known (its
    digest pinned no more) is refused, not returned as the reviews of the archive now known."""
    monkeypatch.setattr(imdb, "TEXT_ARCHIVE_SHA256", sha256_of(small))
    load_imdb(small, cache_dir=tmp_path, progress=False, expected_counts=SMALL)
    other = other_archive(tmp_path)
    monkeypatch.setattr(imdb, "TEXT_ARCHIVE_SHA256", sha256_of(other))
    message = (
        rf"imdb-aclImdb_v1\.cache was built from an archive with sha256 {sha256_of(small)}, which "
        rf"is not one of the two known IMDB archives \(md5 {imdb.IMDB_MD5} or sha256 "
        rf"{sha256_of(other)}\) that {re.escape(str(other))} asks for\. "
    )
    with pytest.raises(DatasetError, match=message + FIX):
        load_imdb(other, cache_dir=tmp_path, progress=False, expected_counts=SMALL)
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    with pytest.raises(DatasetError, match=r"that the IMDB dataset asks for\. " + FIX):
        load_imdb(progress=False, expected_counts=SMALL)  # a carried cache, no archive


def test_cache_whose_key_was_rewritten_is_refused_by_its_recorded_digest(small, tmp_path):
    load_small(other_archive(tmp_path), tmp_path)
    (other_cache,) = tmp_path.glob("imdb-*.cache")
    key = sha256_of(small)
    rewrite_header(other_cache, tmp_path / f"imdb-archive-{key}.cache", key=f"archive-{key}")
    message = (
        rf"was built from an archive with sha256 {other_cache.stem.removeprefix('imdb-archive-')}"
        rf", but {re.escape(str(small))} has sha256 {key}\. "
    )
    with pytest.raises(DatasetError, match=message + FIX):
        load_imdb(small, cache_dir=tmp_path, progress=False, expected_counts=SMALL)


def test_cache_that_records_no_source_digests_still_loads(small, tmp_path):
    first = load_small(small, tmp_path)
    (cache_file,) = tmp_path.glob("imdb-*.cache")
    rewrite_header(cache_file, cache_file, source=None)  # as caches written before digests were
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_imdb(small, cache_dir=tmp_path, progress=False, expected_counts=SMALL)
    assert again.digest == first.digest and again.test.texts == first.test.texts


def test_cache_dir_that_is_a_file_is_refused_by_name(small, tmp_path, monkeypatch):
    file = tmp_path / "file"
    file.write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=r"^cache_dir .*/file is a file, not a folder"):
        load_imdb(small, cache_dir=file, progress=False, expected_counts=SMALL)
    with pytest.raises(
        NotADirectoryError, match=r"^cache_dir .*/file/sub cannot be made: .*/file is a file, not a"
    ):
        load_imdb(small, cache_dir=file / "sub", progress=False, expected_counts=SMALL)
    monkeypatch.setenv("ATTNLIB_CACHE", str(file))
    with pytest.raises(NotADirectoryError, match=r"^ATTNLIB_CACHE .*/file is a file, not a folder"):
        load_imdb(small, progress=False, expected_counts=SMALL)


def test_empty_source_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^source is an empty path; pass an IMDB archive"):
        load_imdb("", cache_dir=tmp_path / "cache", progress=False)
    assert not (tmp_path / "cache").exists()  # refused before anything was made


def test_source_from_environment_and_missing_sources(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_DATA", str(small))
    assert len(load_small(None, tmp_path).train) == 5
    with pytest.raises(FileNotFoundError, match="no IMDB archive or folder at .*missing.tar.gz"):
        load_imdb(tmp_path / "missing.tar.gz", cache_dir=tmp_path)
    monkeypatch.setenv("ATTNLIB_DATA", str(tmp_path / "missing.tar.gz"))
    with pytest.warns(UserWarning, match="missing.tar.gz does not exist"):
        with pytest.raises(DatasetError, match="could not download http://127.0.0.1:9/"):
            load_imdb(cache_dir=tmp_path / "empty", progress=False)
    assert list((tmp_path / "empty").iterdir()) == []


def test_clean_review_replaces_line_breaks():
    assert clean_review("Great.<br /><br />Really<br>great.<br/>") == "Great.  Really great. "


# Downloads from a local server.


class Server:
    """An HTTP server on 127.0.0.1 in a thread, serving ``body``, optionally cut off halfway."""

    def __init__(self, body: bytes, cut: bool):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the name http.server calls)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if cut else body)
                self.wfile.flush()
                outer.requests += 1

            def log_message(self, *args):
                pass

        self.requests = 0
        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/aclImdb_v1.tar.gz"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_download_cut_off_halfway_leaves_no_partial_file(small, tmp_path, monkeypatch):
    with Server(small.read_bytes(), cut=True) as server:
        monkeypatch.setattr(imdb, "IMDB_URL", server.url)
        with pytest.raises(DatasetError, match=r"stopped after [0-9,]+ of [0-9,]+ bytes"):
            load_imdb(cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
    assert server.requests == 1
    assert list((tmp_path / "cache").iterdir()) == []


def test_download_with_wrong_md5_is_deleted(small, tmp_path, monkeypatch):
    with Server(small.read_bytes(), cut=False) as server:
        monkeypatch.setattr(imdb, "IMDB_URL", server.url)
        with pytest.raises(
            DatasetError, match=r"gave a file with md5 [0-9a-f]{32}, expected 7c2ac"
        ):
            load_imdb(cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
    assert list((tmp_path / "cache").iterdir()) == []


def test_download_verified_by_md5_then_loaded(small, tmp_path, monkeypatch):
    body = small.read_bytes()
    monkeypatch.setattr(imdb, "IMDB_MD5", hashlib.md5(body).hexdigest())
    with Server(body, cut=False) as server:
        monkeypatch.setattr(imdb, "IMDB_URL", server.url)
        data = load_imdb(cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
        again = load_imdb(cache_dir=tmp_path / "cache", progress=False, expected_counts=SMALL)
    assert server.requests == 1 and again.digest == data.digest
    assert (tmp_path / "cache" / "aclImdb_v1.tar.gz").read_bytes() == body
    assert sorted(path.name for path in (tmp_path / "cache").iterdir()) == [
        "aclImdb_v1.tar.gz",
        "imdb-aclImdb_v1.cache",
    ]


# The real archive, where ATTNLIB_DATA points at it (.ci/run sets it).

REAL = os.environ.get("ATTNLIB_DATA", "")
needs_real = pytest.mark.skipif(
    not REAL or not Path(REAL).exists(), reason="ATTNLIB_DATA does not point at the IMDB archive"
)


@pytest.fixture(scope="session")
def real_imdb():
    """The real dataset, loaded once into the usual cache (built there on a machine's first run).

    Building the cache takes minutes (lzma is slow to write, fast to read); once built, the
    notebooks and later test runs share it.
    """
    return load_imdb(REAL, progress=False)


@pytest.fixture(scope="session")
def real_cache_file(real_imdb) -> Path:
    return imdb.cache_directory() / "imdb-aclImdb_v1.cache"


@needs_real
def test_real_counts_labels_and_ratings(real_imdb):
    for split, n in [("train", 25_000), ("test", 25_000), ("unlabelled", 50_000)]:
        reviews = getattr(real_imdb, split)
        assert len(reviews.texts) == len(reviews.ids) == len(reviews.labels) == n
    for reviews in (real_imdb.train, real_imdb.test):
        assert np.bincount(reviews.labels).tolist() == [12_500, 12_500]
        assert set(reviews.ratings[reviews.labels == 1].tolist()) == {7, 8, 9, 10}
        assert set(reviews.ratings[reviews.labels == 0].tolist()) == {1, 2, 3, 4}
    assert set(real_imdb.unlabelled.labels.tolist()) == {-1}
    assert len(set(real_imdb.train.ids)) == 25_000


@needs_real
def test_real_known_review(real_imdb):
    index = real_imdb.train.ids.index("pos/0_9")
    assert real_imdb.train.labels[index] == 1 and real_imdb.train.ratings[index] == 9
    assert real_imdb.train.texts[index].startswith("Bromwell High is a cartoon comedy.")


@needs_real
def test_real_cache_is_small_and_reloads_fast(real_imdb, real_cache_file, tmp_path, monkeypatch):
    assert real_cache_file.stat().st_size <= 40_000_000
    shutil.copy(real_cache_file, tmp_path)  # a cache carried to another machine, no archive there
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        data = load_imdb(progress=False)
        seconds.append(time.perf_counter() - start)
    assert data.digest == real_imdb.digest and data.test.texts[-1] == real_imdb.test.texts[-1]
    assert min(seconds) < 2.0, f"reloads took {seconds} s"

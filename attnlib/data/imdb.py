"""The IMDB movie reviews (Maas et al., 2011): download, verify, read safely, cache and load."""

from __future__ import annotations

import hashlib
import http.client
import json
import lzma
import os
import posixpath
import re
import struct
import tarfile
import tempfile
import urllib.error
import urllib.request
import warnings
import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zstandard
from tqdm import tqdm

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_MD5 = "7c2ac02c03563afcf9b574c7e56c153a"  # the canonical archive
TEXT_ARCHIVE_SHA256 = "467b679cc537c35363b65e748622db02f4b7d03ca59f5322a365b45fa599c26a"
DATA_ENV, CACHE_ENV = "ATTNLIB_DATA", "ATTNLIB_CACHE"
# Review folders inside aclImdb/: (split, label) and how many reviews each must hold.
FOLDERS = {
    "train/neg": ("train", 0),
    "train/pos": ("train", 1),
    "test/neg": ("test", 0),
    "test/pos": ("test", 1),
    "train/unsup": ("unlabelled", -1),
}
IMDB_COUNTS = {"train/neg": 12_500, "train/pos": 12_500, "test/neg": 12_500, "test/pos": 12_500}
IMDB_COUNTS["train/unsup"] = 50_000
RATINGS = {0: range(1, 5), 1: range(7, 11), -1: range(0, 1)}  # stars allowed per label
REVIEW = re.compile(r"aclImdb/(train/neg|train/pos|test/neg|test/pos|train/unsup)/(\d+)_(\d+)\.txt")
BR_TAG = re.compile(r"<br\s*/?>")
SPLITS = ("train", "test", "unlabelled")
CACHE_MAGIC, CACHE_FORMAT = b"ATTNIMDB", 3  # 3: the source's key and the counts inside
KNOWN_KEY = "aclImdb_v1"  # the cache key of the two known archives (pinned by digest)
# zstd at level 17: 132 MB of reviews in 38 MB (gzip: 50 MB), read back at over 200 MB/s a core
# (lzma, as small, reads at 40 MB/s). Writing it is slow, once: about 2 minutes of CPU.
CACHE_LEVEL = 17
CHUNK_CHARS = 34_000_000  # texts are compressed in chunks, so that threads share the work


class DatasetError(ValueError):
    """An archive, folder, download or cache that does not hold what it must."""


@dataclass(frozen=True, eq=False)
class Reviews:
    """One split: raw texts, labels (1 pos, 0 neg, -1 none), stars (1-10, 0 for none), ids."""

    texts: list[str]
    labels: np.ndarray  # (n,) int8
    ratings: np.ndarray  # (n,) int8
    ids: list[str]  # "pos/123_9": folder, review number and stars, unique within a split

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        counts = ", ".join(f"{int((self.labels == v).sum())} {k}" for k, v in LABEL_NAMES.items())
        return f"Reviews({len(self)} texts: {counts})"


LABEL_NAMES = {"positive": 1, "negative": 0, "unlabelled": -1}


@dataclass(frozen=True, eq=False)
class IMDB:
    """The dataset: 25,000 train and 25,000 test reviews, 50,000 unlabelled; each a ``Reviews``."""

    train: Reviews
    test: Reviews
    unlabelled: Reviews
    digest: str  # sha256 of the content, the key of the caches built from it

    def unlabelled_outside_test(self) -> list[int]:
        """Indices of the unlabelled reviews whose text is not also a test review, in order.

        The data set itself repeats some texts across its splits (270 of the 50,000 unlabelled
        reviews are test reviews, word for word): anything trained on the unlabelled reviews
        reads these indices, so that no test review is seen before it is scored.
        """
        test = set(self.test.texts)
        return [i for i, text in enumerate(self.unlabelled.texts) if text not in test]


def clean_review(text: str) -> str:
    """The review with its HTML line breaks (``<br />``) replaced by spaces."""
    return BR_TAG.sub(" ", text)


def cache_directory(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir``, else ``$ATTNLIB_CACHE``, else ``~/.cache/attnlib``; created if missing."""
    path = Path(cache_dir or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "attnlib")
    named = "cache_dir" if cache_dir else CACHE_ENV if os.environ.get(CACHE_ENV) else "the cache"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        file = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path)
        fault = "is a file" if file == path else f"cannot be made: {file} is a file"
        raise NotADirectoryError(
            f"{named} {path} {fault}, not a folder; point it at a folder for the cache"
        ) from error
    return path


def load_imdb(
    source: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    expected_counts: Mapping[str, int] | None = None,
) -> IMDB:
    """Load IMDB from ``source`` (archive or ``aclImdb/`` folder), ``$ATTNLIB_DATA`` or the web.

    The dataset is cached under the full SHA-256 of the archive (of a folder: of its files' names,
    sizes and times; the two known archives share the key ``aclImdb_v1``). A cache holds its key,
    its source's digests and its review counts, checked on every load: a corrupt one is rebuilt,
    with a warning; one built from another source (renamed, copied, or of a known archive that
    is known no more) is refused, and so is one whose counts differ from ``expected_counts``
    (default: the real dataset's). ``source=""`` is refused rather than read as the current folder.
    """
    counts = dict(expected_counts or IMDB_COUNTS)
    unknown = sorted(set(counts) - set(FOLDERS))
    if unknown:
        raise ValueError(f"expected_counts names unknown folders {unknown}; known: {list(FOLDERS)}")
    source = _resolve_source(source)
    cache = cache_directory(cache_dir)
    if source is None:  # the canonical dataset: a cache carried here needs no archive
        data = _cached(cache / f"imdb-{KNOWN_KEY}.cache", KNOWN_KEY, "the IMDB dataset", counts)
        if data is not None:
            return data
        source = cache / "aclImdb_v1.tar.gz"
        if not source.exists():
            download_imdb(cache, progress=progress)
    key, known, digests = _identify(source)
    cache_file = cache / f"imdb-{key}.cache"
    data = _cached(cache_file, key, str(source), counts)
    if data is None:
        data = _read_source(source, counts, progress)
        if not known:
            warnings.warn(
                f"{source} is not one of the two known IMDB archives; accepted because its "
                "review counts are right",
                stacklevel=2,
            )
        _write_cache(cache_file, data, key, progress, digests)
    return data


def _cached(path: Path, key: str, asked: str, counts: Mapping[str, int]) -> IMDB | None:
    """The dataset cached at ``path`` for ``key`` (``asked`` names its source), or None; refuses
    one with other counts or from another source."""
    data = _read_cache(path, key, asked)
    if data is not None:
        why = "; the cache was built from a source with these counts (expected_counts?)"
        _check_counts(_counts(data), counts, f"the IMDB cache {path}", why)
    return data


def download_imdb(directory: str | os.PathLike, progress: bool = True) -> Path:
    """Download the canonical archive into ``directory`` via a ``.part`` file, md5-verified."""
    url, expected = IMDB_URL, IMDB_MD5  # read at call time, so tests can point them elsewhere
    target = Path(directory) / "aclImdb_v1.tar.gz"
    part = target.with_name(target.name + ".part")
    md5, size, total = hashlib.md5(), 0, None
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            bar = tqdm(
                total=total, unit="B", unit_scale=True, desc=target.name, disable=not progress
            )
            with bar:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    md5.update(chunk)
                    size += len(chunk)
                    bar.update(len(chunk))
        if total is not None and size != total:
            raise DatasetError(f"the download of {url} stopped after {size:,} of {total:,} bytes")
        if md5.hexdigest() != expected:
            raise DatasetError(
                f"{url} gave a file with md5 {md5.hexdigest()}, expected {expected}; deleted it"
            )
        os.replace(part, target)
    except (OSError, http.client.HTTPException) as error:
        part.unlink(missing_ok=True)
        reason = getattr(error, "reason", error)
        raise DatasetError(
            f"could not download {url} ({reason}) after {size:,} bytes; no partial file kept. "
            f"Without internet, pass a local archive or aclImdb/ folder as source= or {DATA_ENV}"
        ) from error
    except BaseException:
        part.unlink(missing_ok=True)  # a cut-off or refused download leaves nothing behind
        raise
    return target


def _resolve_source(source: str | os.PathLike | None) -> Path | None:
    """The path to read: ``source``, else ``$ATTNLIB_DATA``, else None (cache or download)."""
    if source is not None:
        if not os.fspath(source):  # Path("") is ".": it would read the current folder
            raise ValueError(
                "source is an empty path; pass an IMDB archive or aclImdb/ folder, or None for "
                f"${DATA_ENV}, the cache or the download"
            )
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"no IMDB archive or folder at {path}")
        return path
    value = os.environ.get(DATA_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.exists():
        warnings.warn(
            f"{DATA_ENV}={value} does not exist; using the cache or downloading", stacklevel=3
        )
        return None
    return path


def _identify(source: Path) -> tuple[str, bool, dict[str, str]]:
    """A cache key for ``source``, whether it is a known archive, and its digests ({} for a
    folder); refuses a corrupt known archive."""
    if source.is_dir():
        return "folder-" + _folder_fingerprint(_dataset_root(source)), False, {}
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    with open(source, "rb") as stream:
        while block := stream.read(1 << 22):
            sha256.update(block)
            md5.update(block)
    known = {"aclImdb_v1.tar.gz": ("md5", md5, IMDB_MD5)}
    known["aclImdb_v1-text.tar.gz"] = ("sha256", sha256, TEXT_ARCHIVE_SHA256)
    digests = {"sha256": sha256.hexdigest(), "md5": md5.hexdigest()}
    if _is_known(digests):
        return KNOWN_KEY, True, digests
    if source.name in known:
        name, digest, expected = known[source.name]
        raise DatasetError(
            f"{source} has {name} {digest.hexdigest()}, but the known {source.name} has "
            f"{expected}: the file is corrupt or incomplete; delete it and fetch it again"
        )
    return "archive-" + sha256.hexdigest(), False, digests


def _is_known(digests: Mapping[str, str]) -> bool:
    """Whether an archive of these digests is one of the two known ones (read at call time)."""
    return digests.get("md5") == IMDB_MD5 or digests.get("sha256") == TEXT_ARCHIVE_SHA256


def _dataset_root(folder: Path) -> Path:
    """The ``aclImdb`` folder itself, given it or the folder holding it."""
    return folder / "aclImdb" if (folder / "aclImdb").is_dir() else folder


def _folder_fingerprint(root: Path) -> str:
    """sha256 of every review file's name, size and time: a new key when the folder changes."""
    digest = hashlib.sha256()
    for folder in FOLDERS:
        if not (root / folder).is_dir():
            continue
        for entry in sorted(os.scandir(root / folder), key=lambda entry: entry.name):
            info = entry.stat()
            digest.update(f"{folder}/{entry.name}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _read_source(source: Path, counts: Mapping[str, int], progress: bool) -> IMDB:
    """Read every review of an archive or folder, check the counts, return the dataset."""
    found: dict[str, list[tuple[int, int, str]]] = {folder: [] for folder in FOLDERS}
    bar = tqdm(total=sum(counts.values()), unit=" reviews", desc=source.name, disable=not progress)
    with bar:
        reviews = _archive_reviews(source) if source.is_file() else _folder_reviews(source)
        for name, raw in reviews:
            match = REVIEW.fullmatch(name)
            folder, number, stars = match.group(1), int(match.group(2)), int(match.group(3))
            if stars not in RATINGS[FOLDERS[folder][1]]:
                raise DatasetError(f"{source}: {name} has {stars} stars, impossible in {folder}/")
            found[folder].append((number, stars, raw.decode("utf-8", errors="replace")))
            bar.update()
    _check_counts({folder: len(rows) for folder, rows in found.items()}, counts, str(source))
    return _assemble(found)


def _check_counts(
    found: Mapping[str, int], counts: Mapping[str, int], where: str, why: str = ""
) -> None:
    """Refuse reviews whose count in a folder is not the expected one, naming ``where``."""
    for folder, expected in counts.items():
        if found[folder] != expected:
            missing = " (is a split missing?)" if not found[folder] else why
            raise DatasetError(
                f"{where}: {found[folder]:,} reviews in aclImdb/{folder}/, "
                f"expected {expected:,}{missing}"
            )


def _counts(data: IMDB) -> dict[str, int]:
    """How many reviews of ``data`` came from each folder."""
    return {
        folder: int((getattr(data, split).labels == label).sum())
        for folder, (split, label) in FOLDERS.items()
    }


def _archive_reviews(path: Path):
    """Yield (member name, bytes) of each review, refusing unsafe members; streams the tar."""
    seen: set[str] = set()
    try:
        with tarfile.open(path, mode="r|*") as archive:
            for member in archive:
                name = _check_member(member, path)
                if name in seen:
                    raise DatasetError(f"{path}: member {name!r} occurs twice")
                seen.add(name)
                if member.isfile() and REVIEW.fullmatch(name):
                    yield name, archive.extractfile(member).read()
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError) as error:
        raise DatasetError(f"{path} is truncated or corrupt: {error}") from error


def _check_member(member: tarfile.TarInfo, path: Path) -> str:
    """The member's normalised name; refuses escapes, links and devices, naming the member."""
    name = posixpath.normpath(member.name)
    if member.name.startswith("/") or name == ".." or name.startswith("../"):
        raise DatasetError(f"{path}: member {member.name!r} would land outside the target folder")
    if member.issym() or member.islnk():
        kind = "symbolic" if member.issym() else "hard"
        raise DatasetError(
            f"{path}: member {member.name!r} is a {kind} link to {member.linkname!r}"
        )
    if not (member.isfile() or member.isdir()):
        raise DatasetError(f"{path}: member {member.name!r} is a device or other special file")
    return name


def _folder_reviews(folder: Path):
    """Yield (name as in the archive, bytes) of each review file of an extracted folder."""
    root = _dataset_root(folder)
    for sub in FOLDERS:
        if not (root / sub).is_dir():
            continue  # counted as missing below, with the expected number
        for entry in os.scandir(root / sub):
            name = f"aclImdb/{sub}/{entry.name}"
            if entry.is_file() and REVIEW.fullmatch(name):
                yield name, Path(entry.path).read_bytes()


def _assemble(found: dict[str, list[tuple[int, int, str]]]) -> IMDB:
    """Reviews sorted by folder and number (archive order varies), with the content digest."""
    parts: dict[str, list] = {split: [] for split in SPLITS}
    for folder, (split, label) in FOLDERS.items():
        for number, stars, text in sorted(found[folder]):
            parts[split].append((text, label, stars, f"{folder.split('/')[1]}/{number}_{stars}"))
    splits = {
        split: Reviews(
            [row[0] for row in rows],
            np.array([row[1] for row in rows], dtype=np.int8),
            np.array([row[2] for row in rows], dtype=np.int8),
            [row[3] for row in rows],
        )
        for split, rows in parts.items()
    }
    index, chunks = _serialise(splits)
    return IMDB(**splits, digest=_digest(index, chunks))


def _digest(index: bytes, chunks: list[bytes]) -> str:
    """sha256 of the serialised content: equal datasets have equal digests."""
    digest = hashlib.sha256(index)
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def _serialise(splits: Mapping[str, Reviews]) -> tuple[bytes, list[bytes]]:
    """The index (per split: labels, stars, lengths, ids) and the texts in chunks of whole reviews.

    Lengths count characters, so that a chunk decoded at once is cut into reviews by slicing.
    """
    index, chunks, current, size = [], [], [], 0
    for split in SPLITS:
        reviews = splits[split]
        ids = "\n".join(reviews.ids).encode()
        lengths = np.array([len(text) for text in reviews.texts], dtype="<u4").tobytes()
        index += [struct.pack("<II", len(reviews), len(ids))]
        index += [reviews.labels.tobytes(), reviews.ratings.tobytes(), lengths, ids]
        for text in reviews.texts:
            current.append(text)
            size += len(text)
            if size >= CHUNK_CHARS:
                chunks.append("".join(current).encode())
                current, size = [], 0
    if current:
        chunks.append("".join(current).encode())
    return b"".join(index), chunks


def _deserialise(index: bytes, texts: list[str]) -> dict[str, Reviews]:
    """The inverse of ``_serialise``, given the chunks already decoded."""
    columns, at = {}, 0
    for split in SPLITS:
        n, n_ids = struct.unpack_from("<II", index, at)
        labels = np.frombuffer(index, np.int8, n, at + 8).copy()
        ratings = np.frombuffer(index, np.int8, n, at + 8 + n).copy()
        lengths = np.frombuffer(index, "<u4", n, at + 8 + 2 * n)
        at += 8 + 6 * n
        ids = index[at : at + n_ids].decode().split("\n") if n else []
        at += n_ids
        columns[split] = (labels, ratings, lengths, ids)
    all_lengths = np.concatenate([column[2] for column in columns.values()])
    reviews, done = [], 0
    for text in texts:  # chunks hold whole reviews: cut each at its own review boundaries
        ends = np.cumsum(all_lengths[done:], dtype=np.int64)
        count = int(np.searchsorted(ends, len(text), side="right"))
        if count == 0 or ends[count - 1] != len(text):
            raise DatasetError("its chunks do not hold whole reviews")
        starts = [0, *ends[: count - 1].tolist()]
        reviews += [text[a:b] for a, b in zip(starts, ends[:count].tolist(), strict=True)]
        done += count
    if done != len(all_lengths):
        raise DatasetError(f"its chunks hold {done:,} reviews, its index {len(all_lengths):,}")
    splits, offset = {}, 0
    for split, (labels, ratings, lengths, ids) in columns.items():
        splits[split] = Reviews(reviews[offset : offset + len(lengths)], labels, ratings, ids)
        offset += len(lengths)
    return splits


def _compress(piece: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=CACHE_LEVEL).compress(piece)


def _decompress(piece: memoryview) -> str:
    return zstandard.ZstdDecompressor().decompress(piece).decode("utf-8")


def _write_cache(
    path: Path,
    data: IMDB,
    key: str,
    progress: bool = False,
    digests: Mapping[str, str] | None = None,
) -> None:
    """Write the dataset as one zstd-compressed file, atomically (temporary file, then rename)."""
    index, texts = _serialise({split: getattr(data, split) for split in SPLITS})
    total = sum(map(len, texts))
    bar = tqdm(
        total=total, unit="B", unit_scale=True, desc="writing the cache", disable=not progress
    )
    with bar, ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # zstd releases the GIL
        chunks = [_compress(index)]
        for piece, chunk in zip(texts, pool.map(_compress, texts), strict=True):
            chunks.append(chunk)
            bar.update(len(piece))
    payload = b"".join(chunks)
    header = {
        "key": key,  # the source's: "archive-" + its full sha256, or KNOWN_KEY
        "source": dict(digests or {}),  # the archive's sha256 and md5: which known one it was
        "counts": _counts(data),
        "digest": data.digest,
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
        "chunks": [len(chunk) for chunk in chunks],
    }
    encoded = json.dumps(header).encode()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(CACHE_MAGIC + struct.pack("<II", CACHE_FORMAT, len(encoded)) + encoded)
            out.write(payload)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; a cache is an ordinary file
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read_cache(path: Path, key: str, asked: str) -> IMDB | None:
    """The dataset cached for ``key``, or None; a corrupt cache is ignored with a warning, one
    built from another source than ``asked`` (a name, for the message) is refused."""
    if not path.exists():
        return None
    try:
        blob = path.read_bytes()
        header, start = _read_header(blob)
    except (ValueError, KeyError, TypeError, struct.error) as error:
        return _ignored(path, error)
    _check_cache_source(
        path, header, key, asked
    )  # sound or not, another source's reviews are refused
    try:
        payload = memoryview(blob)[start:]
        expected = sum(header["chunks"])
        if len(payload) != expected:
            raise DatasetError(f"its payload has {len(payload):,} bytes, expected {expected:,}")
        if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
            raise DatasetError("its payload does not match its checksum")
        ends = np.cumsum(header["chunks"]).tolist()
        pieces = [payload[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            texts = list(pool.map(_decompress, pieces[1:]))
        index = zstandard.ZstdDecompressor().decompress(pieces[0])
        data = IMDB(**_deserialise(index, texts), digest=header["digest"])
        if header["counts"] != _counts(data):
            raise DatasetError(f"its counts {header['counts']} do not match its reviews")
        return data
    except (ValueError, KeyError, TypeError, struct.error, zstandard.ZstdError) as error:
        return _ignored(path, error)


def _read_header(blob: bytes) -> tuple[dict, int]:
    """A cache's JSON header and where its payload starts; refuses a foreign or damaged one."""
    if blob[:8] != CACHE_MAGIC:
        raise DatasetError("it does not start with the cache's magic bytes")
    version, size = struct.unpack_from("<II", blob, 8)
    if version != CACHE_FORMAT:
        raise DatasetError(f"it has format {version}, this attnlib writes {CACHE_FORMAT}")
    header = json.loads(blob[16 : 16 + size])
    if not isinstance(header, dict) or not isinstance(header.get("key"), str):
        raise DatasetError("its header is not a JSON object with the source's key")
    if not isinstance(header.get("source", {}), dict):
        raise DatasetError("its header's source digests are not a JSON object")
    return header, 16 + size


def _ignored(path: Path, error: Exception) -> None:
    """Warn that the (corrupt) cache at ``path`` is ignored and will be rebuilt; None."""
    message = f"ignoring the IMDB cache {path} and rebuilding it: {error}"
    warnings.warn(message, stacklevel=5)  # _ignored < _read_cache < _cached < load_imdb < caller


def _check_cache_source(path: Path, header: Mapping, key: str, asked: str) -> None:
    """Refuse a cache whose recorded source is not the one asked for, saying how to fix it."""
    held, source = header["key"], header.get("source")
    fix = (
        f"delete {path} (or the cache folder {path.parent}) to rebuild it from the source, or "
        f"point {CACHE_ENV} (or cache_dir) at another folder"
    )
    if held != key:
        raise DatasetError(
            f"the IMDB cache {path} holds the reviews of {_described(held)}, not of "
            f"{asked} ({_described(key)}): was it renamed or copied? To fix it, {fix}"
        )
    if not source:
        return  # a folder's key is its fingerprint; older caches recorded no digests
    if held == KNOWN_KEY and not _is_known(source):
        raise DatasetError(
            f"the IMDB cache {path} was built from an archive with sha256 {source.get('sha256')}, "
            f"which is not one of the two known IMDB archives (md5 {IMDB_MD5} or sha256 "
            f"{TEXT_ARCHIVE_SHA256}) that {asked} asks for. To fix it, {fix}"
        )
    if held.startswith("archive-") and source.get("sha256") != held.removeprefix("archive-"):
        raise DatasetError(
            f"the IMDB cache {path} was built from an archive with sha256 "
            f"{source.get('sha256')}, but {asked} has sha256 "
            f"{held.removeprefix('archive-')}. To fix it, {fix}"
        )


def _described(key: str) -> str:
    """A cache key in words, for messages."""
    if key == KNOWN_KEY:
        return f"one of the two known IMDB archives, key {KNOWN_KEY!r}"
    if key.startswith("archive-"):
        return f"the archive with sha256 {key.removeprefix('archive-')}"
    if key.startswith("folder-"):
        return f"the aclImdb/ folder with fingerprint {key.removeprefix('folder-')}"
    return f"the source of key {key!r}"

"""Checkpoints safe to write and to load: atomic, ``weights_only``, verified, all or nothing.

``torch.load`` never reads the CRC-32 that ``torch.save`` writes for each zip record, so a file
with a flipped byte would load without a word. Each checkpoint here also carries the SHA-256 of
every tensor's dtype, shape and bytes (under ``"sha256"``, keyed like ``model['fc.weight']``), and
:func:`load_checkpoint` checks the records' CRC-32s and those checksums before it changes anything.

Checkpoints written before the checksums (no ``"sha256"``) load when every zip record passes its
CRC-32 check, which covers every byte; one that cannot be checked at all (records without CRC-32,
or not a zip archive) is refused: if you trust it, read it with ``torch.load(path,
weights_only=True)`` and write it again with :func:`save_checkpoint`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

_FROM = "attnlib.checkpoints.save_checkpoint"


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    **extra: int | float | str | bool | None | list | dict | torch.Tensor,
) -> Path:
    """Write model (and optimizer) state atomically: a crash never leaves a half-written file.

    ``extra`` values must be what :func:`load_checkpoint` can read back under
    ``weights_only=True``: tensors and plain Python data (int, float, str, bool, None, and lists,
    tuples and dicts of them); anything else (a NumPy scalar, a Path) is refused here, naming the
    key, rather than written into a file that could not be loaded. Every tensor's SHA-256 is
    stored beside it, and the zip records get their CRC-32s, for :func:`load_checkpoint` to check.
    """
    path = Path(path)
    for key, value in extra.items():
        _check_plain(value, key, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "extra": dict(extra)}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    state["sha256"] = _checksums(state)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file, _crc32_on():
            torch.save(state, file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


_PLAIN = (int, float, str, bool, type(None))
_TENSORS = (torch.Tensor, nn.Parameter)  # what weights_only rebuilds; other subclasses are not


def _check_plain(value: object, key: str, path: Path) -> None:
    """Refuse an extra value that ``torch.load(weights_only=True)`` could not read back."""
    if type(value) in _PLAIN or type(value) in _TENSORS:  # exact: np.float64 subclasses float
        return
    if type(value) in (list, tuple):
        for index, item in enumerate(value):
            _check_plain(item, f"{key}[{index}]", path)
        return
    if type(value) is dict:
        for name, item in value.items():
            if type(name) not in _PLAIN:
                raise TypeError(
                    f"checkpoint extra {key} for {path} has a key {name!r} of type "
                    f"{type(name).__name__}; only int, float, str, bool or None keys can be "
                    "loaded back"
                )
            _check_plain(item, f"{key}[{name!r}]", path)
        return
    raise TypeError(
        f"checkpoint extra {key} for {path} is a {type(value).__module__}."
        f"{type(value).__qualname__} ({value!r}), which load_checkpoint could not read back "
        "(weights_only=True); pass a tensor or plain int, float, str, bool or None "
        "(e.g. float(x), str(p))"
    )


@contextlib.contextmanager
def _crc32_on() -> Iterator[None]:
    """Have ``torch.save`` write each zip record's CRC-32, even if it was switched off."""
    get = getattr(torch.serialization, "get_crc32_options", None)
    if get is None or get():  # older torch always writes them
        yield
        return
    torch.serialization.set_crc32_options(True)
    try:
        yield
    finally:
        torch.serialization.set_crc32_options(False)


def _tensors(value: object, where: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside ``value`` (dicts, lists, tuples), with its path, e.g. model['w']."""
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{where}[{index}]")


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as one flat uint8 tensor on the CPU (a copy only where needed)."""
    tensor = tensor.detach().resolve_conj().resolve_neg()  # lazy conjugate/negative views
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    return tensor.cpu().contiguous().reshape(-1).view(torch.uint8)


def _sha256(tensor: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes."""
    digest = hashlib.sha256(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
    digest.update(_bytes(tensor).numpy())
    return digest.hexdigest()


def _checksums(state: dict) -> dict[str, str]:
    """The SHA-256 of every tensor of the model, optimizer and extra parts, by path."""
    return {
        where: _sha256(tensor)
        for part in ("model", "optimizer", "extra")
        if part in state
        for where, tensor in _tensors(state[part], part)
    }


def load_checkpoint(
    path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> dict:
    """Load weights saved by :func:`save_checkpoint` (tensors only: ``weights_only=True``).

    All or nothing: the whole file is read, its zip records' CRC-32s and its tensors' SHA-256s
    checked, and its parameter names, shapes and tied weights checked against the model before
    anything is changed; an optimizer that refuses its saved state is left as it was, so a failed
    load leaves the model's and the optimizer's state untouched. Fails with the names of the
    missing, unexpected and mis-shaped parameters when the checkpoint belongs to another model,
    and with the record and tensor when the file is corrupt; every error names the file.
    Returns the extra values.
    """
    path = Path(path)
    state = _read(path)
    _check_compatible(state["model"], model.state_dict(), path)
    before = optimizer.state_dict() if optimizer is not None else None
    try:
        # The optimizer first: torch checks its groups before changing anything, and if the
        # model then failed, the optimizer goes back to ``before`` (references, no copies).
        if optimizer is not None and "optimizer" in state:
            try:
                optimizer.load_state_dict(state["optimizer"])
            except Exception as error:
                raise ValueError(
                    f"checkpoint {path} does not match the optimizer "
                    f"({type(error).__name__}: {error}); nothing was loaded"
                ) from error
        try:
            model.load_state_dict(state["model"])  # names and shapes were checked above
        except Exception as error:
            raise ValueError(f"cannot load checkpoint {path} into the model: {error}") from error
    except ValueError:
        if optimizer is not None:
            optimizer.load_state_dict(before)
        raise
    return state.get("extra", {})


def _read(path: Path) -> dict:
    """The checkpoint's state, read with ``weights_only=True`` and verified."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}") from None
    except Exception as error:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()  # torch's message has colours
        first_line = text.splitlines()[0] if text else ""
        failing, _ = _check_records(path)
        raise ValueError(
            f"cannot read checkpoint {path}: the file is truncated or corrupt, or holds objects "
            "that torch.load(weights_only=True) refuses, or was not written by "
            f"{_FROM} ({type(error).__name__}: {first_line})"
            + (f"; {_failing(failing)}" if failing else "")
        ) from error
    if not isinstance(state, dict) or "model" not in state:
        raise ValueError(f"{path} is not a checkpoint written by {_FROM}")
    _check_state_dict(path, state["model"])
    _verify(path, state)
    return state


def _check_state_dict(path: Path, model: object) -> None:
    """Refuse a checkpoint whose ``"model"`` entry is not a dict of names to tensors."""
    if not isinstance(model, dict):
        raise ValueError(
            f"{path} is not a checkpoint written by {_FROM}: its 'model' entry is a "
            f"{type(model).__name__}, not a state dict of parameter names to tensors"
        )
    for name, value in model.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise ValueError(
                f"{path} is not a checkpoint written by {_FROM}: its 'model' state dict holds "
                f"a {type(value).__name__} under {name!r}, where a tensor under a parameter "
                "name belongs"
            )


def _check_records(path: Path) -> tuple[list[str], str | None]:
    """The zip records failing their CRC-32 check, and why none could be checked (or None)."""
    failing = []
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
            if not any(record.CRC for record in records if record.file_size):
                return [], "its zip records carry no CRC-32 (torch's set_crc32_options(False))"
            for record in records:
                try:
                    with archive.open(record) as stream:  # checks the CRC-32 at the end
                        while stream.read(1 << 24):
                            pass
                except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError):
                    failing.append(record.filename)
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return failing, f"it is not a readable zip archive ({error})"
    return failing, None


def _failing(records: list[str]) -> str:
    more = f" and {len(records) - 8} more" if len(records) > 8 else ""
    return f"zip records failing the CRC-32 check: {', '.join(records[:8])}{more}"


def _verify(path: Path, state: dict) -> None:
    """Refuse a checkpoint whose zip records or tensors do not match their checksums."""
    failing, unchecked = _check_records(path)
    problems = [_failing(failing)] if failing else []
    stored = state.get("sha256")
    if stored is None and unchecked is not None:
        raise ValueError(
            f"checkpoint {path} cannot be verified: it has no SHA-256 checksums (written before "
            f"{_FROM} stored them, or by something else) and {unchecked}; if you trust it, "
            "read it with torch.load(path, weights_only=True) and write it again with "
            "save_checkpoint"
        )
    if stored is not None:
        actual = _checksums(state)
        if not isinstance(stored, dict):
            problems.append("its table of SHA-256 checksums is not a dict")
            stored = {}
        wrong = [where for where in actual if where in stored and stored[where] != actual[where]]
        unpaired = sorted(map(str, set(actual) ^ set(stored)))
        if wrong:
            problems.append(f"tensors not matching their saved SHA-256: {', '.join(wrong[:8])}")
        if unpaired:
            problems.append(f"tensors and SHA-256s without each other: {', '.join(unpaired[:8])}")
    if problems:
        raise ValueError(f"checkpoint {path} is corrupt: {'; '.join(problems)}; nothing was loaded")


def _check_compatible(saved: dict, expected: dict, path: str | Path) -> None:
    """Refuse missing, unexpected or mis-shaped names, and two saved tensors for one tied one."""
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    shapes = [
        f"{name}: checkpoint {tuple(saved[name].shape)} vs model {tuple(expected[name].shape)}"
        for name in sorted(set(saved) & set(expected))
        if saved[name].shape != expected[name].shape
    ]
    if missing or unexpected or shapes:
        problems = []
        if missing:
            problems.append(f"missing from checkpoint: {', '.join(missing[:8])}")
        if unexpected:
            problems.append(f"not in model: {', '.join(unexpected[:8])}")
        if shapes:
            problems.append("shape mismatch: " + "; ".join(shapes[:8]))
        raise ValueError(f"checkpoint {path} does not match the model ({' | '.join(problems)})")
    split = [
        names
        for names in _tied(expected)
        if any(not _same(saved[names[0]], saved[name]) for name in names[1:])
    ]
    if split:
        groups = "; ".join(" = ".join(names) for names in split[:8])
        raise ValueError(
            f"checkpoint {path} does not match the model: the model ties {groups} (one tensor "
            "under several names), but the checkpoint holds different tensors for them (saved "
            "from a model without tied weights?); nothing was loaded"
        )


def _tied(state: dict[str, torch.Tensor]) -> list[list[str]]:
    """Groups of names under which a state dict holds one and the same tensor."""
    groups: dict[tuple, list[str]] = {}
    for name, tensor in state.items():
        if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
            continue
        if tensor.numel() == 0 or tensor.is_meta:
            continue  # empty and meta tensors have no storage to share
        key = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
            tensor.dtype,
        )
        groups.setdefault(key, []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def _same(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Whether two saved tensors are bit for bit the same (NaNs included)."""
    if first.dtype != second.dtype or first.shape != second.shape:
        return False
    return torch.equal(_bytes(first), _bytes(second))

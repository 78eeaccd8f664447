"""Checkpoints: checksums and CRCs against flipped bytes, tied weights, tensors in extra."""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

import attnlib.training
from attnlib import checkpoints, seed_everything
from attnlib.checkpoints import load_checkpoint, save_checkpoint
from attnlib.encoder import MaskedLanguageModel, TransformerConfig


def small_model(seed: int = 0) -> nn.Module:
    seed_everything(seed)
    return nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))


def trained(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A small model and its Adam after one step, so the optimizer holds tensors too."""
    model = small_model(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model(torch.ones(5, 4)).pow(2).sum().backward()
    optimizer.step()
    return model, optimizer


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def unchanged(model: nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(tensor, before[name]) for name, tensor in model.state_dict().items())


def record_holding(path: Path, content: bytes) -> tuple[str, int]:
    """The name of the zip record whose data is ``content``, and where its data starts."""
    with zipfile.ZipFile(path) as archive:
        for record in archive.infolist():
            if archive.read(record) == content:
                with open(path, "rb") as file:
                    file.seek(record.header_offset + 26)
                    name_length, extra_length = struct.unpack("<HH", file.read(4))
                return record.filename, record.header_offset + 30 + name_length + extra_length
    raise AssertionError(f"no record of {path} holds the {len(content)} bytes asked for")


def flip(path: Path, offset: int, mask: int = 0x40) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().contiguous().numpy().tobytes()


@pytest.mark.parametrize(
    ("pick", "where"),
    [
        (lambda model, optimizer: model[0].weight, "model['0.weight']"),
        (
            lambda model, optimizer: optimizer.state[model[2].bias]["exp_avg"],
            "optimizer['state'][3]['exp_avg']",
        ),
    ],
)
def test_flipped_byte_in_a_tensor_record_is_refused_naming_record_and_tensor(tmp_path, pick, where):
    model, optimizer = trained()
    path = save_checkpoint(tmp_path / "model.pt", model, optimizer)
    record, start = record_holding(path, tensor_bytes(pick(model, optimizer)))
    flip(path, start + 3)  # the first float's top exponent bit: 0.1 becomes 3.4e37
    restored, restored_optimizer = trained(seed=1)
    before = weights(restored)
    expected = (
        f"checkpoint {re.escape(str(path))} is corrupt: zip records failing the CRC-32 check: "
        f"{re.escape(record)}; tensors not matching their saved SHA-256: {re.escape(where)}; "
        "nothing was loaded"
    )
    with pytest.raises(ValueError, match=f"^{expected}$"):
        load_checkpoint(path, restored, restored_optimizer)
    assert unchanged(restored, before)


def test_flipped_byte_in_the_pickle_is_refused_naming_the_record(tmp_path):
    path = save_checkpoint(tmp_path / "model.pt", small_model(), note="hello")
    with zipfile.ZipFile(path) as archive:
        pickle_record = next(r.filename for r in archive.infolist() if r.filename.endswith(".pkl"))
        pickled = archive.read(pickle_record)
    _, start = record_holding(path, pickled)
    flip(path, start + pickled.index(b"hello"), 0x01)  # "hello" becomes "iello": still unpickles
    with pytest.raises(ValueError, match=f"^checkpoint {re.escape(str(path))} is corrupt: zip re"):
        load_checkpoint(path, small_model(seed=1))
    with pytest.raises(ValueError, match=f"CRC-32 check: {re.escape(pickle_record)};"):
        load_checkpoint(path, small_model(seed=1))


def test_tensor_changed_before_it_was_written_is_refused_by_its_checksum(tmp_path):
    path = save_checkpoint(tmp_path / "model.pt", small_model())
    state = torch.load(path, weights_only=True)
    state["model"]["2.bias"][0] += 1.0  # zip CRCs written afresh: only the SHA-256 can tell
    torch.save(state, path)
    with pytest.raises(
        ValueError,
        match=r"is corrupt: tensors not matching their saved SHA-256: model\['2.bias'\]; nothing",
    ):
        load_checkpoint(path, small_model(seed=1))
    save_checkpoint(path, small_model())
    state = torch.load(path, weights_only=True)
    state["extra"]["added"] = torch.ones(1)  # a tensor that was never summed
    torch.save(state, path)
    expected = r"is corrupt: tensors and SHA-256s without each other: extra\['added'\]; nothing"
    with pytest.raises(ValueError, match=expected):
        load_checkpoint(path, small_model(seed=1))


def old_checkpoint(path: Path, model: nn.Module) -> Path:
    """A checkpoint as save_checkpoint wrote them before checksums: no "sha256" entry."""
    torch.save({"model": model.state_dict(), "extra": {"epochs": 2}}, path)
    return path


def test_old_checkpoint_without_checksums_loads_if_its_zip_crcs_pass(tmp_path):
    model = small_model()
    path = old_checkpoint(tmp_path / "old.pt", model)
    restored = small_model(seed=1)
    assert load_checkpoint(path, restored) == {"epochs": 2}
    assert unchanged(restored, model.state_dict())
    record, start = record_holding(path, tensor_bytes(model[0].weight))
    flip(path, start + 3)
    expected = rf"checkpoint .*old.pt is corrupt: zip records failing the CRC-32 check: {record};"
    with pytest.raises(ValueError, match=expected):
        load_checkpoint(path, small_model(seed=1))


@pytest.fixture
def crc32_off():
    """torch.save without CRC-32s, for the test's duration."""
    before = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(False)
    yield
    torch.serialization.set_crc32_options(before)


def test_old_checkpoint_without_checksums_or_crcs_is_refused(tmp_path, crc32_off):
    path = old_checkpoint(tmp_path / "old.pt", small_model())
    with pytest.raises(
        ValueError,
        match=r"old.pt cannot be verified: it has no SHA-256 checksums .* carry no CRC-32",
    ):
        load_checkpoint(path, small_model(seed=1))


def test_save_writes_crcs_even_when_torch_is_told_not_to(tmp_path, crc32_off):
    path = save_checkpoint(tmp_path / "model.pt", small_model())
    assert torch.serialization.get_crc32_options() is False  # the setting is given back
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert all(record.CRC for record in archive.infolist() if record.file_size)


def mlm(tie_weights: bool, seed: int = 0) -> MaskedLanguageModel:
    seed_everything(seed)
    config = TransformerConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=1, d_ff=16)
    return MaskedLanguageModel(config, tie_weights=tie_weights)


def test_untied_checkpoint_into_a_tied_model_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "untied.pt", mlm(tie_weights=False))
    tied = mlm(tie_weights=True, seed=1)
    before = weights(tied)
    expected = (
        r"does not match the model: the model ties encoder.embedding.weight = output.weight "
        r"\(one tensor under several names\), but the checkpoint holds different tensors"
    )
    with pytest.raises(ValueError, match=expected):
        load_checkpoint(path, tied)
    assert unchanged(tied, before)
    assert tied.output.weight is tied.encoder.embedding.weight


def test_tied_weights_load_where_the_saved_tensors_agree(tmp_path):
    saved = mlm(tie_weights=True)
    path = save_checkpoint(tmp_path / "tied.pt", saved)
    for tie_weights in (True, False):  # tied into tied, and tied into untied (two equal copies)
        model = mlm(tie_weights, seed=1)
        load_checkpoint(path, model)
        assert unchanged(model, saved.state_dict())
    untied = mlm(tie_weights=False)
    with torch.no_grad():
        untied.output.weight.copy_(untied.encoder.embedding.weight)
    path = save_checkpoint(tmp_path / "equal.pt", untied)
    model = mlm(tie_weights=True, seed=1)
    load_checkpoint(path, model)  # two saved tensors, bit for bit the same: nothing is lost
    assert unchanged(model, untied.state_dict())


def test_tensors_in_extra_round_trip(tmp_path):
    extra = {
        "mask": torch.tensor([True, False, True]),
        "scale": torch.tensor(0.5, dtype=torch.float64),
        "nested": {"steps": [torch.arange(3), torch.ones(2, dtype=torch.bfloat16)]},
        "center": nn.Parameter(torch.zeros(2)),
        "note": "plain values still fine",
    }
    path = save_checkpoint(tmp_path / "model.pt", small_model(), **extra)
    loaded = load_checkpoint(path, small_model(seed=1))
    assert loaded["note"] == extra["note"]
    pairs = [
        (loaded["mask"], extra["mask"]),
        (loaded["scale"], extra["scale"]),
        (loaded["nested"]["steps"][0], extra["nested"]["steps"][0]),
        (loaded["nested"]["steps"][1], extra["nested"]["steps"][1]),
        (loaded["center"], extra["center"]),
    ]
    for got, want in pairs:
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert type(loaded["center"]) is nn.Parameter
    stored = torch.load(path, weights_only=True)["sha256"]
    assert "extra['nested']['steps'][1]" in stored  # extra tensors are checked too


def test_training_re_exports_the_checkpoint_functions():
    assert attnlib.training.save_checkpoint is checkpoints.save_checkpoint
    assert attnlib.training.load_checkpoint is checkpoints.load_checkpoint

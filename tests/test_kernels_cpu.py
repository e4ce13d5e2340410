"""engine.kernels.cpu: the running CPU's cache sizes, from sysconf, else sysfs, else defaults."""

from engine.kernels import cpu


def _cache(folder, index, level, kind, size):
    d = folder / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


def test_sysfs_sizes_are_read_per_level_and_kind(monkeypatch, tmp_path):
    _cache(tmp_path, 0, 1, "Data", "48K")
    _cache(tmp_path, 1, 1, "Instruction", "32K")
    _cache(tmp_path, 2, 2, "Unified", "2M")
    monkeypatch.setattr(cpu, "_SYSFS", tmp_path)
    assert cpu._sysfs_size(1) == 48 * 1024
    assert cpu._sysfs_size(2) == 2 * 1024 * 1024
    assert cpu._sysfs_size(3) == 0


def test_sizes_fall_back_to_sysfs_then_to_the_defaults(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "_sysconf", lambda name: 0)
    _cache(tmp_path, 0, 1, "Data", "32K")
    monkeypatch.setattr(cpu, "_SYSFS", tmp_path)
    cpu.host.cache_clear()
    try:
        assert (cpu.host().l1d, cpu.host().l2) == (32 * 1024, cpu.DEFAULT_L2)
        monkeypatch.setattr(cpu, "_SYSFS", tmp_path / "absent")
        cpu.host.cache_clear()
        assert (cpu.host().l1d, cpu.host().l2) == (cpu.DEFAULT_L1D, cpu.DEFAULT_L2)
    finally:
        cpu.host.cache_clear()


def test_the_model_names_the_first_processor_with_its_family_and_model():
    block = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
             "model name\t: AMD EPYC\nflags\t\t: fpu avx512f\n\n")
    text = block.format(n=0) + block.format(n=1).replace("26", "25")
    assert cpu.model_name(text) == "AMD EPYC (family 26, model 2)"
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\n"
    assert cpu.model_name(arm) == ""  # no name: host() falls back to platform's
    assert cpu.model_name("model name\t: Intel Xeon\ncpu family\t: 6\n") == "Intel Xeon"


def test_this_machine_has_a_model_and_positive_sizes():
    info = cpu.host()
    assert info.model and info.l1d > 0 and info.l2 >= info.l1d


def test_the_tiles_row_block_follows_the_l1_size(monkeypatch):
    """Operand rows of a block fill at most half the L1 data cache: 32 KiB (the AVX2 EPYC)
    gives 30 rows of k = 128 float32, 48 KiB gives 48; never below 24 or above ROW_BLOCK."""
    import pytest

    pytest.importorskip("numba")
    from engine.kernels._compiled import conv_tiles

    for l1d, k, rows in ((32 * 1024, 128, 30), (48 * 1024, 128, 48), (48 * 1024, 16, 96),
                         (32 * 1024, 4096, 24)):
        monkeypatch.setattr(cpu, "host", lambda l1d=l1d: cpu.Host("test CPU", l1d, 2**21))
        assert conv_tiles.row_block(k, 4) == rows

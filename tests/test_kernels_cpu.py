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


def test_this_machine_has_a_model_and_positive_sizes():
    info = cpu.host()
    assert info.model and info.l1d > 0 and info.l2 >= info.l1d

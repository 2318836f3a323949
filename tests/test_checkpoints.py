"""Checkpoints a run can trust (issue 42): a manifest per step, corrupt files named, the last
intact step offered and taken, verl's retention carried over to whole step folders, an
unwritable run folder refused at start-up, and SIGTERM handled as Ctrl-C."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import zipfile

import numpy as np
import pytest
from omegaconf import OmegaConf

from reasonrl.checkpoints import (
    LAST_INTACT,
    MANIFEST,
    RESUME_KEY,
    after_verl_save,
    before_verl_save,
    checkpoint_status,
    last_intact,
    load_checkpointed_state,
    prepare_run_folder,
    verify_step,
    write_manifest,
)
from reasonrl.errors import UserError
from reasonrl.progress import RunRecord, summary_lines
from reasonrl.state_io import CorruptCheckpoint, load_state, save_state

SHARD = "actor/model_world_size_1_rank_0.pt"
STATE = "reasonrl/sampling.npz"


def torch_zip(path, payload: bytes) -> None:
    """A file in torch.save's format (an uncompressed zip archive), without importing torch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        archive.writestr("archive/data/0", payload)


def make_step(run_dir, step: int, manifest: bool = True, tracker: bool = True):
    """A step folder as verl 0.9 and reasonrl's trainer leave it."""
    folder = run_dir / f"global_step_{step}"
    torch_zip(folder / SHARD, os.urandom(4096) + bytes([step]))
    torch_zip(folder / "actor/optim_world_size_1_rank_0.pt", os.urandom(8192))
    (folder / "actor/huggingface").mkdir(parents=True)
    (folder / "actor/huggingface/config.json").write_text('{"model_type": "qwen2"}')
    torch_zip(folder / "data.pt", b"dataloader")
    save_state(folder / STATE, {"step": step, "weights": np.arange(step + 3, dtype=np.float64)})
    if manifest:
        write_manifest(folder)
    if tracker:
        (run_dir / "latest_checkpointed_iteration.txt").write_text(str(step))
    return folder


def truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def run_config(run_dir, **trainer):
    return OmegaConf.create(
        {
            "trainer": {
                "default_local_dir": str(run_dir),
                "resume_mode": "auto",
                "resume_from_path": None,
                "max_actor_ckpt_to_keep": None,
                "max_critic_ckpt_to_keep": None,
                **trainer,
            },
            "actor_rollout_ref": {"actor": {"checkpoint": {"async_save": False}}},
        }
    )


# ---------------------------------------------------------------- manifest and checksums
def test_the_manifest_records_every_file_and_an_untouched_step_verifies(tmp_path):
    folder = make_step(tmp_path, 3)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["step"] == 3
    assert set(manifest["files"]) == {
        SHARD,
        "actor/optim_world_size_1_rank_0.pt",
        "actor/huggingface/config.json",
        "data.pt",
        STATE,
    }
    for relative, entry in manifest["files"].items():
        assert entry["size"] == (folder / relative).stat().st_size and len(entry["sha256"]) == 64
    assert verify_step(folder) is None
    assert load_checkpointed_state(folder / STATE)["step"] == 3
    assert not list(folder.rglob("*.partial")), "atomic writes leave no partial file"


def test_a_hash_budget_bounds_the_hashing_of_verls_files_but_never_reasonrls(tmp_path):
    folder = make_step(tmp_path, 1, manifest=False)
    write_manifest(folder, hash_budget=0)
    files = json.loads((folder / MANIFEST).read_text())["files"]
    assert "sha256" in files[STATE], "reasonrl's own state is always hashed"
    assert all("sha256" not in entry for name, entry in files.items() if not name.startswith("reasonrl/"))
    assert verify_step(folder) is None
    truncate(folder / SHARD)  # without a recorded sha256, the size still catches a cut file
    problem = verify_step(folder)
    assert problem.path == folder / SHARD and "when saved" in problem.reason


def test_a_truncated_actor_shard_is_named(tmp_path):
    folder = make_step(tmp_path, 2)
    truncate(folder / SHARD)
    problem = verify_step(folder)
    assert problem.path == folder / SHARD
    assert "bytes" in problem.reason and "when saved" in problem.reason


def test_an_altered_file_of_the_same_size_fails_its_checksum(tmp_path):
    folder = make_step(tmp_path, 2)
    data = bytearray((folder / "data.pt").read_bytes())
    data[-30] ^= 0xFF
    (folder / "data.pt").write_bytes(bytes(data))
    problem = verify_step(folder)
    assert problem.path == folder / "data.pt" and "checksum mismatch" in problem.reason


def test_without_a_manifest_a_cut_zip_is_still_found(tmp_path):
    """A step saved before manifests existed, with verl's async_save, or stopped between verl's
    tracker and the manifest: torch's and numpy's zip files are checked by their structure."""
    folder = make_step(tmp_path, 2, manifest=False)
    assert verify_step(folder) is None
    truncate(folder / SHARD)
    problem = verify_step(folder)
    assert problem.path == folder / SHARD and "BadZipFile" in problem.reason


def test_a_step_without_its_actor_checkpoint_is_not_intact(tmp_path):
    folder = make_step(tmp_path, 2, manifest=False)
    for path in sorted((folder / "actor").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    assert verify_step(folder).path == folder / "actor"


def test_a_truncated_plugin_state_raises_an_error_naming_the_file(tmp_path):
    folder = make_step(tmp_path, 2)
    truncate(folder / STATE)
    with pytest.raises(CorruptCheckpoint) as error:  # checked against the manifest
        load_checkpointed_state(folder / STATE)
    assert error.value.subject == str(folder / STATE) and "checksum mismatch" in error.value.message
    with pytest.raises(CorruptCheckpoint) as error:  # no manifest: numpy's BadZipFile, named
        load_state(folder / STATE)
    assert error.value.subject == str(folder / STATE)
    assert error.value.message.startswith("corrupt checkpoint: cannot be read (BadZipFile")
    assert isinstance(error.value, UserError)
    assert verify_step(folder).path == folder / STATE


def test_the_corrupt_checkpoint_error_crosses_rays_process_boundary():
    error = pickle.loads(pickle.dumps(CorruptCheckpoint("/x/global_step_2/data.pt", "corrupt checkpoint: y")))
    assert (error.subject, error.message) == ("/x/global_step_2/data.pt", "corrupt checkpoint: y")


def test_an_unreadable_manifest_is_named(tmp_path):
    folder = make_step(tmp_path, 2)
    (folder / MANIFEST).write_text('{"files": {"data.pt": ')
    problem = verify_step(folder)
    assert problem.path == folder / MANIFEST and "manifest unreadable" in problem.reason


# ---------------------------------------------------------------- last intact step
def test_the_last_intact_step_is_the_newest_that_verifies(tmp_path):
    for step in (3, 4, 5):
        make_step(tmp_path, step)
    truncate(tmp_path / "global_step_5" / STATE)
    truncate(tmp_path / "global_step_4" / SHARD)
    assert last_intact(tmp_path) == tmp_path / "global_step_3"
    assert last_intact(tmp_path, below=3) is None
    status = checkpoint_status(tmp_path)
    assert status.intact == tmp_path / "global_step_3" and status.latest == tmp_path / "global_step_5"
    assert status.problem.path == tmp_path / "global_step_5" / STATE


def test_the_summary_names_the_last_intact_step_and_the_corrupt_newer_one(tmp_path):
    make_step(tmp_path, 4)
    make_step(tmp_path, 5)
    line = next(line for line in summary_lines(RunRecord(5), tmp_path, "finished") if "last checkpoint" in line)
    assert line.split()[-1] == str(tmp_path / "global_step_5")
    truncate(tmp_path / "global_step_5" / SHARD)
    line = next(line for line in summary_lines(RunRecord(5), tmp_path, "finished") if "last checkpoint" in line)
    assert line.startswith(f"  last checkpoint   {tmp_path / 'global_step_4'} (global_step_5 is corrupt: ")
    assert str(tmp_path / "global_step_5" / SHARD) in line


def test_a_corrupt_resume_step_stops_the_launch_naming_the_file_and_the_intact_one(tmp_path, capsys):
    make_step(tmp_path, 4)
    make_step(tmp_path, 5)
    truncate(tmp_path / "global_step_5" / SHARD)
    config = run_config(tmp_path)
    with pytest.raises(CorruptCheckpoint) as error:
        prepare_run_folder(config)
    text = str(error.value)
    assert error.value.subject == str(tmp_path / "global_step_5" / SHARD)
    assert "corrupt checkpoint:" in text and "global_step_4 is intact: rerun with +reasonrl_resume=last_intact" in text
    assert f"trainer.resume_mode=resume_path trainer.resume_from_path={tmp_path / 'global_step_4'}" in text
    assert config.trainer.resume_mode == "auto", "nothing taken without the flag"

    config = run_config(tmp_path)
    config[RESUME_KEY] = LAST_INTACT
    prepare_run_folder(config)
    assert config.trainer.resume_mode == "resume_path"
    assert config.trainer.resume_from_path == str(tmp_path / "global_step_4")
    err = capsys.readouterr().err
    assert str(tmp_path / "global_step_5" / SHARD) in err and "resuming from the last intact step" in err
    assert (tmp_path / "global_step_5" / SHARD).exists() and (
        tmp_path / "latest_checkpointed_iteration.txt"
    ).read_text() == "5"


def test_an_intact_resume_step_goes_on_and_the_flag_changes_nothing(tmp_path, capsys):
    make_step(tmp_path, 5)
    config = run_config(tmp_path)
    config[RESUME_KEY] = LAST_INTACT
    prepare_run_folder(config)
    assert config.trainer.resume_mode == "auto"
    assert (
        f"resuming from {tmp_path / 'global_step_5'} (its files checked against its manifest)"
        in capsys.readouterr().err
    )


def test_without_an_intact_step_the_advice_is_to_start_over(tmp_path):
    make_step(tmp_path, 1)
    truncate(tmp_path / "global_step_1" / "data.pt")
    config = run_config(tmp_path)
    config[RESUME_KEY] = LAST_INTACT
    with pytest.raises(CorruptCheckpoint, match="no earlier intact step.*trainer.resume_mode=disable"):
        prepare_run_folder(config)


def test_a_tracker_naming_a_missing_step_is_refused_not_a_silent_fresh_start(tmp_path):
    make_step(tmp_path, 2)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")
    with pytest.raises(CorruptCheckpoint, match="missing. global_step_2 is intact") as error:
        prepare_run_folder(run_config(tmp_path))
    assert error.value.subject == str(tmp_path / "global_step_3")


def test_resume_path_and_disable_are_read_as_verl_reads_them(tmp_path):
    make_step(tmp_path, 2)
    make_step(tmp_path, 3)
    truncate(tmp_path / "global_step_2" / STATE)
    prepare_run_folder(run_config(tmp_path, resume_mode="disable"))  # nothing is resumed: nothing checked
    with pytest.raises(CorruptCheckpoint) as error:  # the step given, not the tracker's
        prepare_run_folder(
            run_config(tmp_path, resume_mode="resume_path", resume_from_path=str(tmp_path / "global_step_2"))
        )
    assert error.value.subject == str(tmp_path / "global_step_2" / STATE)


def test_an_unknown_resume_choice_is_named(tmp_path):
    config = run_config(tmp_path)
    config[RESUME_KEY] = "latest"
    with pytest.raises(UserError) as error:
        prepare_run_folder(config)
    assert error.value.subject == RESUME_KEY and LAST_INTACT in error.value.message


# ---------------------------------------------------------------- writable run folder
def test_a_run_folder_that_cannot_be_written_is_refused_at_start_up(tmp_path):
    (tmp_path / "afile").write_text("a regular file, not a folder (refused for root too)")
    with pytest.raises(UserError) as error:
        prepare_run_folder(run_config(tmp_path / "afile" / "ckpt"))
    assert error.value.subject == "trainer.default_local_dir"
    assert "cannot be written: Not a directory" in error.value.message
    with pytest.raises(UserError, match="/proc cannot be written"):  # a folder that exists: the probe file
        prepare_run_folder(run_config("/proc"))  # (no file can be created in /proc, not even by root)
    prepare_run_folder(run_config(tmp_path / "new" / "run"))  # created when missing
    assert (tmp_path / "new" / "run").is_dir() and not list((tmp_path / "new" / "run").iterdir())


# ---------------------------------------------------------------- around verl's save
def retire(folder) -> None:
    """What verl's retention (max_actor_ckpt_to_keep) leaves of an old step: no actor folder."""
    for path in sorted((folder / "actor").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (folder / "actor").rmdir()


def test_step_folders_follow_verls_retention(tmp_path, capsys):
    for step in (1, 2, 3):
        make_step(tmp_path, step)
    make_step(tmp_path, 4, manifest=False)
    retire(tmp_path / "global_step_1")
    retire(tmp_path / "global_step_2")
    (tmp_path / "global_step_2" / "critic").mkdir()  # a critic verl still keeps: the folder stays
    after_verl_save(run_config(tmp_path), 4)
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == [f"global_step_{s}" for s in (1, 2, 3, 4)]
    assert (tmp_path / "global_step_4" / MANIFEST).exists(), "the manifest is written after verl's save"

    after_verl_save(run_config(tmp_path, max_actor_ckpt_to_keep=2), 4)
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == [f"global_step_{s}" for s in (2, 3, 4)]
    assert "removed global_step_1" in capsys.readouterr().out
    (tmp_path / "global_step_2" / "critic").rmdir()
    after_verl_save(run_config(tmp_path, max_critic_ckpt_to_keep=1), 4)
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == ["global_step_3", "global_step_4"]
    assert verify_step(tmp_path / "global_step_4") is None


def test_no_manifest_while_verls_async_save_is_still_writing(tmp_path):
    make_step(tmp_path, 1, manifest=False)
    config = run_config(tmp_path)
    config.actor_rollout_ref.actor.checkpoint.async_save = True
    after_verl_save(config, 1)
    assert not (tmp_path / "global_step_1" / MANIFEST).exists()


def test_a_step_folder_left_by_an_earlier_launch_is_replaced_by_the_new_save(tmp_path, capsys):
    folder = make_step(tmp_path, 5)
    truncate(folder / SHARD)
    before_verl_save(folder)
    assert not folder.exists() and "left by an earlier launch" in capsys.readouterr().out
    before_verl_save(folder)  # nothing there: nothing to do


# ---------------------------------------------------------------- SIGTERM
@pytest.fixture
def sigterm_handler_restored():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_raises_keyboard_interrupt_once(sigterm_handler_restored):
    from reasonrl.cli.train import SigtermAsCtrlC

    with pytest.raises(KeyboardInterrupt):
        with SigtermAsCtrlC() as sigterm:
            os.kill(os.getpid(), signal.SIGTERM)
    assert sigterm.received
    os.kill(os.getpid(), signal.SIGTERM)  # a second one, while the launch shuts down: ignored
    assert sigterm.stopped(KeyboardInterrupt())


def test_the_handler_is_put_back_after_ray_init_replaced_it(sigterm_handler_restored, monkeypatch):
    """verl's main body starts Ray with ray.init, which installs Ray's driver handler (sys.exit(15),
    turned into SystemExit(1) inside ray.get): ours is put back once Ray has started."""
    import ray

    from reasonrl.cli.train import SigtermAsCtrlC

    def rays_init(*args, **kwargs):  # stands in for Ray's: no cluster started here
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
        return "started"

    monkeypatch.setattr(ray, "init", rays_init)
    with pytest.raises(KeyboardInterrupt):
        with SigtermAsCtrlC() as sigterm:
            assert ray.init(num_cpus=1) == "started"
            os.kill(os.getpid(), signal.SIGTERM)
    assert sigterm.received and ray.init is rays_init, "ray.init is Ray's own again afterwards"


def test_rays_driver_handler_exit_counts_as_the_same_stop(sigterm_handler_restored):
    from reasonrl.cli.train import SigtermAsCtrlC

    with SigtermAsCtrlC() as sigterm:
        assert not sigterm.stopped(SystemExit(1)) and not sigterm.stopped(KeyboardInterrupt())
        assert sigterm.stopped(SystemExit(signal.SIGTERM))  # ray.init's handler: sys.exit(signum)
        os.kill(os.getpid(), signal.SIGTERM)  # ours again, ignoring the next one


def test_run_training_ends_a_sigterm_as_interrupted_with_exit_143(sigterm_handler_restored, monkeypatch, capsys):
    from reasonrl import config as api  # where the core's validate_config lives
    from reasonrl.cli import train

    def validate(config):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(api, "validate_config", validate)
    with pytest.raises(SystemExit) as exit_info:
        train.run_training(OmegaConf.create({}))
    assert exit_info.value.code == train.SIGTERM_EXIT == 143
    assert "reasonrl: interrupted (SIGTERM)" in capsys.readouterr().err

    def ray_handler_exit(config):  # what Ray's driver handler raises once ray.init has run
        raise SystemExit(signal.SIGTERM)

    monkeypatch.setattr(api, "validate_config", ray_handler_exit)
    with pytest.raises(SystemExit) as exit_info:
        train.run_training(OmegaConf.create({}))
    assert exit_info.value.code == 143

    monkeypatch.setattr(api, "validate_config", lambda config: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C is unchanged (reasonrl.cli.main: exit 130)
        train.run_training(OmegaConf.create({}))


def test_the_checkpoint_checks_run_before_the_presets_assets(monkeypatch, tmp_path):
    """run_training refuses an unwritable folder before the prepare step (minutes on a first run)."""
    from reasonrl import config as api  # where the core's validate_config lives
    from reasonrl.cli import train

    (tmp_path / "afile").write_text("")
    monkeypatch.setattr(api, "validate_config", lambda config: None)
    monkeypatch.setattr(train, "check_upstream_versions", lambda config: None)
    monkeypatch.setattr(train, "run_prepare_step", lambda config: pytest.fail("the prepare step ran first"))
    with pytest.raises(UserError, match="cannot be written"):
        train.run_training(run_config(tmp_path / "afile" / "ckpt"))

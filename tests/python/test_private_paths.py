"""What cuweave trusts on disk: compiled kernels are loaded (and then run) only from a folder and files that no
other user could have written, as ssh treats its keys; the folder is made 0700 whatever the umask. Runs on every
backend (the cache is plain files); the cases of another owner need root, to give a file away."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings

import pytest

from cuweave import _private_paths, kernels

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534


@pytest.fixture
def open_umask():
    """The most permissive umask: whatever cuweave makes private, it makes so itself."""
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "home" / ".cache" / "cuweave" / "kernels"
    monkeypatch.setenv("CUWEAVE_CACHE_DIR", str(folder))
    monkeypatch.setattr(kernels, "_refused_folders", set())
    return folder


def plant(folder, key="k", binary=b"\x7fELF not really a cubin"):
    """A cache entry as cuweave writes one: the binary and a sidecar whose hash matches it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.cubin").write_bytes(binary)
    (folder / f"{key}.json").write_text(json.dumps({"lowered_name": "k", "log": "",
                                                    "sha256": hashlib.sha256(binary).hexdigest()}))
    return key


def open_to(path, writable_by: int) -> None:
    """Lets group (to a group other users are in) or others write `path`."""
    if writable_by == stat.S_IWGRP:
        others = [g for g in os.getgroups() if g != os.getegid()]
        if AS_ROOT:
            os.chown(path, -1, NOBODY)
        elif others:
            os.chown(path, -1, others[0])
        else:
            pytest.skip("no group to give the path to")
    os.chmod(path, mode(path) | writable_by)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_cache_folder_and_the_folders_made_above_it_are_0700_whatever_the_umask(cache, open_umask):
    assert kernels._trusted_cache_folder() == cache
    assert mode(cache) == 0o700
    assert mode(cache.parent) == 0o700 and mode(cache.parent.parent) == 0o700  # cuweave/, .cache/ made here too
    kernels._store_on_disk(cache, "key", b"binary", "name", "log")
    assert mode(cache / "key.cubin") == 0o600 and mode(cache / "key.json") == 0o600
    assert kernels._load_from_disk(cache, "key") == (b"binary", "name", "log")


def test_an_entry_in_a_private_folder_is_loaded(cache):
    cache.mkdir(parents=True, mode=0o700)
    key = plant(cache)
    folder = kernels._trusted_cache_folder()
    assert folder == cache
    assert kernels._load_from_disk(folder, key) is not None


@pytest.mark.parametrize("where", ["folder", "parent"])
@pytest.mark.parametrize("writable_by", [stat.S_IWGRP, stat.S_IWOTH])
def test_a_cache_folder_that_others_can_write_is_refused_once_with_a_warning(cache, where, writable_by):
    key = plant(cache)
    opened = cache if where == "folder" else cache.parent
    open_to(opened, writable_by)
    with pytest.warns(RuntimeWarning, match="compiled in memory") as said:
        assert kernels._trusted_cache_folder() is None
    assert str(opened) in str(said[0].message) and "CUWEAVE_CACHE_DIR" in str(said[0].message)
    assert mode(opened) & writable_by  # left as found: narrowing it now would not undo what was put there
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per folder
        assert kernels._trusted_cache_folder() is None
    assert (cache / f"{key}.cubin").exists()


@pytest.mark.skipif(not _private_paths._private_group(os.getegid()), reason="this user's group has other members")
def test_a_folder_writable_by_this_users_own_group_is_trusted(cache):
    cache.mkdir(parents=True, mode=0o700)
    os.chmod(cache, 0o770)  # a umask of 002, usual where each user has a group of their own
    assert _private_paths.untrusted_reason(cache) is None


def test_a_sticky_folder_above_the_cache_is_no_reason_to_refuse_it(cache):
    cache.mkdir(parents=True, mode=0o700)
    os.chmod(cache.parent, 0o1777)  # as /tmp: others add entries but cannot rename ours
    assert _private_paths.untrusted_reason(cache) is None


@pytest.mark.parametrize("writable_by", [stat.S_IWGRP, stat.S_IWOTH])
@pytest.mark.parametrize("suffix", [".cubin", ".json"])
def test_a_cache_file_that_others_can_write_is_not_loaded_and_is_replaced(cache, writable_by, suffix):
    cache.mkdir(parents=True, mode=0o700)
    key = plant(cache)
    open_to(cache / f"{key}{suffix}", writable_by)
    assert kernels._load_from_disk(cache, key) is None
    kernels._store_on_disk(cache, key, b"compiled here", "k", "")
    assert kernels._load_from_disk(cache, key) == (b"compiled here", "k", "")


@pytest.mark.skipif(not AS_ROOT, reason="giving a file to another user needs root")
@pytest.mark.parametrize("suffix", [".cubin", ".json"])
def test_a_cache_file_another_user_owns_is_not_loaded(cache, suffix):
    cache.mkdir(parents=True, mode=0o700)
    key = plant(cache)
    os.chown(cache / f"{key}{suffix}", NOBODY, NOBODY)
    assert "owned by uid 65534" in _private_paths.untrusted_reason(cache / f"{key}{suffix}")
    assert kernels._load_from_disk(cache, key) is None


@pytest.mark.skipif(not AS_ROOT, reason="giving a folder to another user needs root")
def test_a_cache_folder_another_user_owns_is_refused(cache):
    cache.mkdir(parents=True, mode=0o700)
    plant(cache)
    os.chown(cache, NOBODY, NOBODY)
    with pytest.warns(RuntimeWarning, match="owned by uid 65534"):
        assert kernels._trusted_cache_folder() is None


def test_a_symbolic_link_is_judged_by_the_folders_it_leads_to(cache, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    os.chmod(shared, 0o777)
    cache.parent.mkdir(parents=True)
    cache.symlink_to(shared)
    assert "can be written by others" in _private_paths.untrusted_reason(cache)

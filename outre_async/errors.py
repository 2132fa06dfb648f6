"""Every error outre-async raises on purpose, in one tree.

    OutreError                         base: catch this to catch everything below
    ├── ConfigError (ValueError)       an argument value is out of range or inconsistent
    │   ├── DeviceNotFoundError        the device asked for (``cuda:3``) is not on this machine
    │   └── AllPairsError              a loader was handed an all-pairs candidate set: rank with ``oa.evaluate_links``
    ├── DatasetError                   an on-disk dataset is missing or not usable
    │   ├── DatasetNotFoundError       no dataset (no directory or no manifest) at the path
    │   ├── DatasetExistsError         the output path already holds something; pass overwrite
    │   ├── ManifestError              manifest.json unreadable, incomplete or of another format
    │   │   └── FormatVersionError     written by another (newer or older) format version
    │   ├── DatasetCorruptError        a file is missing, truncated, or disagrees with the manifest
    │   ├── DatasetChangedError        a file changed (rewritten, replaced) while a loader read it (carries path)
    │   └── DatasetReadError           reading a dataset file failed (carries path, byte offset, errno)
    ├── PartitionError                 a partition folder (``partitions/<name>/``) is missing or not usable
    │   ├── PartitionNotFoundError     no partitions of that name; run `outre partition`
    │   ├── PartitionExistsError       partitions of that name exist already; pass overwrite
    │   ├── PartitionCorruptError      a partition file is missing, truncated or inconsistent
    │   ├── PartitionMismatchError     written for another dataset (or another version of it)
    │   └── PartitionReadError         reading a partition file failed (carries path, byte offset, errno)
    ├── ProfileError                   a profile (``profile/<name>/``) is missing or not usable
    │   ├── ProfileNotFoundError       no profile of that name; run `outre profile`
    │   ├── ProfileCorruptError        a profile file is missing, truncated or inconsistent
    │   └── ProfileMismatchError       written for another dataset (version) or another loader setup
    ├── CheckpointError                a checkpoint (``last.pt``) is missing, unreadable or malformed
    │   └── CheckpointMismatchError    written for another dataset or an incompatible config; --resume --force
    ├── TooManyOpenFilesError          the process (or system) ran out of file descriptors (EMFILE/ENFILE)
    ├── OverwriteRefusedError          overwrite would replace something outre did not write
    ├── OutputLockedError              another run holds the lock of the output folder (two ``outre train`` into one --out)
    ├── InvalidGraphError (ValueError) graph data handed to a writer/importer breaks an invariant
    │   └── NonFiniteFeatureError      a feature value is NaN/inf or beyond its stored dtype's range (carries row)
    ├── InputFormatError               an input file cannot be parsed (carries path and line)
    ├── ExtractorError                 a feature read failed (carries path and byte offset)
    ├── ProbeError                     the disk probe cannot measure the path given (too small, a read failed)
    │   └── DirectIOUnsupported        the file system refuses O_DIRECT (tmpfs): probe buffered reads instead
    ├── NonFiniteLossError             a training step's loss is NaN or inf (names the epoch, step and seeds)
    ├── HistoryError                   the history was misused (hook not called, wrong width, twice)
    ├── ConcurrentEpochError           an epoch was started while another of the same loader is being iterated
    ├── DistributedError               another rank failed or a collective timed out (data-parallel run)
    ├── NotSupportedError              a PyG feature outre-async does not offer yet (hetero, link prediction)
    └── PipelineClosed                 the loader was closed or failed; no more batches
        └── LoaderForkedError          a loader started in one process was iterated in a forked child

    SmallBufferWarning (UserWarning)   buffer_rows below one batch's rows: correct, but each batch streams in pieces

Messages say what was expected, what was found and what to do, on one line, so that the CLI can
print ``str(exc)`` as-is.  Wrapping errors use ``raise ... from exc`` to keep the cause.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AllPairsError",
    "CheckpointError",
    "CheckpointMismatchError",
    "ConcurrentEpochError",
    "ConfigError",
    "DatasetCorruptError",
    "DatasetChangedError",
    "DatasetError",
    "DatasetExistsError",
    "DatasetNotFoundError",
    "DatasetReadError",
    "DeviceNotFoundError",
    "DirectIOUnsupported",
    "DistributedError",
    "ExtractorError",
    "FormatVersionError",
    "HistoryError",
    "InputFormatError",
    "InvalidGraphError",
    "LoaderForkedError",
    "ManifestError",
    "NonFiniteFeatureError",
    "NonFiniteLossError",
    "NotSupportedError",
    "OutputLockedError",
    "OutreError",
    "OverwriteRefusedError",
    "PartitionCorruptError",
    "PartitionError",
    "PartitionExistsError",
    "PartitionMismatchError",
    "PartitionNotFoundError",
    "PartitionReadError",
    "PipelineClosed",
    "ProbeError",
    "ProfileCorruptError",
    "ProfileError",
    "ProfileMismatchError",
    "ProfileNotFoundError",
    "SmallBufferWarning",
    "TooManyOpenFilesError",
]


class OutreError(Exception):
    """Base class of every error raised on purpose by outre-async."""


class ConfigError(OutreError, ValueError):
    """An argument value is out of range or inconsistent with another one."""


class DeviceNotFoundError(ConfigError):
    """The device asked for (``device="cuda"``, ``--device cuda:3``) is not on this machine; the
    message lists the ones that are."""


class AllPairsError(ConfigError):
    """``edge_label_index`` handed to a loader is an all-pairs candidate set (far more pairs than the
    graph has edges, or a full cartesian product of sources and destinations): sampling a subgraph
    around every pair of every batch is the wrong tool for ranking (PyG users who tried it saw the
    loader ask for many gigabytes); :func:`outre_async.evaluate_links` scores such sets from
    embeddings, in chunks."""


class DatasetError(OutreError):
    """An on-disk dataset is missing or cannot be used."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """No dataset at the given path."""


class DatasetExistsError(DatasetError, FileExistsError):
    """The output path already exists and overwriting was not requested."""


class ManifestError(DatasetError):
    """``manifest.json`` cannot be read or lacks required fields."""


class FormatVersionError(ManifestError):
    """The dataset was written by a different format version."""


class DatasetCorruptError(DatasetError):
    """A dataset file is missing, truncated, or inconsistent with the manifest."""


class DatasetChangedError(DatasetError):
    """A file of the dataset changed (written in place, truncated, replaced, removed) since it was
    opened, while a loader reads it (``store._watch``): ``path`` says which.  Open the dataset again."""

    def __init__(self, message: str, *, path: str | Path):
        super().__init__(message)
        self.path = Path(path)


class _ReadFailure(OutreError):
    """Where a read failed: ``path``, ``offset`` (bytes) and ``errno`` (or None), in the message too."""

    def __init__(self, message: str, *, path: str | Path, offset: int, errno: int | None = None):
        super().__init__(f"{path} at byte {offset}: {message}")
        self.path = Path(path)
        self.offset = offset
        self.errno = errno


class DatasetReadError(_ReadFailure, DatasetError):
    """Reading a dataset file failed (an ``OSError`` such as EIO); ``path`` and ``offset`` say where."""


class PartitionError(OutreError):
    """A partition folder is missing or cannot be used."""


class PartitionNotFoundError(PartitionError, FileNotFoundError):
    """No partitions of the given name under the dataset."""


class PartitionExistsError(PartitionError, FileExistsError):
    """Partitions of that name exist already and overwriting was not requested."""


class PartitionCorruptError(PartitionError):
    """A partition file is missing, truncated, or inconsistent with ``meta.json``."""


class PartitionMismatchError(PartitionError):
    """The partitions were computed for another dataset or another version of it."""


class PartitionReadError(_ReadFailure, PartitionError):
    """Reading a partition file failed (an ``OSError`` such as EIO); ``path`` and ``offset`` say where."""


class ProfileError(OutreError):
    """A profile folder (``profile/<name>/``) is missing or cannot be used."""


class ProfileNotFoundError(ProfileError, FileNotFoundError):
    """No profile of the given name under the dataset."""


class ProfileCorruptError(ProfileError):
    """A profile file is missing, truncated, or inconsistent with its ``meta.json``."""


class ProfileMismatchError(ProfileError):
    """The profile was measured for another dataset (or version), partitions or loader setup: stale."""


class CheckpointError(OutreError):
    """A training checkpoint is missing, is not a regular file of a plausible size, cannot be loaded, or
    holds values of the wrong type."""


class CheckpointMismatchError(CheckpointError):
    """The checkpoint was written for another dataset (its identity differs) or a config that cannot
    continue it; ``outre train --resume --force`` resumes anyway."""


class TooManyOpenFilesError(OutreError):
    """Opening a file (or a socket, an io_uring, an eventfd) failed with EMFILE/ENFILE: the process or
    the system has no file descriptors left.  Close loaders you no longer use or raise ``ulimit -n``."""


class OverwriteRefusedError(OutreError, FileExistsError):
    """``overwrite`` was asked, but the output is not empty and not an outre folder of the expected
    kind (or holds files outre did not write, or holds the input): nothing was changed."""


class OutputLockedError(OutreError):
    """Another process holds the lock of the output folder asked for (``outre train --out DIR`` while
    another run trains into DIR): two runs would mix their checkpoints and metrics.  Nothing was written."""


class InvalidGraphError(OutreError, ValueError):
    """Graph data handed to a writer or importer breaks an invariant (ids out of range, ...)."""


class NonFiniteFeatureError(InvalidGraphError):
    """A feature value handed to a writer is NaN or inf, or beyond the range of the dtype it is stored
    in; ``row`` is the node whose row holds the first one."""

    def __init__(self, message: str, *, row: int):
        super().__init__(message)
        self.row = row


class InputFormatError(OutreError):
    """An input file cannot be parsed; ``path`` and ``line`` (1-based, or None) say where."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = None if path is None else Path(path)
        self.line = line


class ExtractorError(OutreError):
    """A feature read failed; ``path`` and ``offset`` (bytes) say where, ``errno`` why (or None)."""

    def __init__(self, message: str, *, path: str | Path, offset: int, errno: int | None = None):
        super().__init__(f"{path} at byte {offset}: {message}")
        self.path = Path(path)
        self.offset = offset
        self.errno = errno


class ProbeError(OutreError):
    """The disk probe cannot measure the path given: a file smaller than the largest read, a folder
    without room for a scratch file, a read that failed (the message says which and what to do)."""


class DirectIOUnsupported(ProbeError):
    """The file system refuses ``O_DIRECT`` reads (tmpfs, some overlays): what the probe would measure
    is the page cache, not the device.  Probe again with ``direct=False`` and say so, as the CLI does."""


class HistoryError(OutreError):
    """A model trained on history batches without the hook, or pushed rows of the wrong width or twice."""


class ConcurrentEpochError(OutreError):
    """An epoch of a loader was started (``for``, ``async for``, ``iter()``, from another thread or
    task) while another epoch of the same loader is still being iterated: a loader runs one epoch at
    a time.  Finish or close the first iterator, or use a second loader."""


class NonFiniteLossError(OutreError):
    """A training step's loss is NaN or inf: training stops before that step changes the weights.
    ``epoch`` (or None), ``step`` (1-based within the epoch) and ``seeds`` (the batch's first seed ids)
    say where; NaN features (``outre info --verify`` finds them) or too high a learning rate are the
    usual causes."""

    def __init__(self, message: str, *, epoch: int | None, step: int, seeds: list[int]):
        super().__init__(message)
        self.epoch, self.step, self.seeds = epoch, step, seeds


class NotSupportedError(OutreError, NotImplementedError):
    """A feature PyG has and outre-async does not offer yet (heterogeneous graphs, link prediction,
    edge features); the message names it and what to do instead."""


class PipelineClosed(OutreError):
    """The loader was closed (or failed) and delivers no more batches."""


class LoaderForkedError(PipelineClosed):
    """A loader whose threads and io_uring were started in one process was used in a child forked from
    it (``multiprocessing``'s fork, torch ``DataLoader`` workers): the child has none of those threads.
    Make the loader in the worker, after the fork."""


class DistributedError(OutreError):
    """A data-parallel run failed: a rank exited with an error, or a collective (all-reduce, barrier)
    broke or timed out because another rank failed or stopped taking steps."""


class SmallBufferWarning(UserWarning):
    """``buffer_rows`` was given below the rows one batch is expected to read: every batch then streams
    through the feature buffer in pieces, which is correct but far slower: each piece waits for the one
    before it (``loader._budget.warn_small_buffer``; ``tests/loader/test_streaming.py``).  Leave
    ``buffer_rows`` out, or give at least the rows the warning names."""

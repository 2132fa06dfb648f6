"""Resume mid-epoch: :meth:`StatefulEpochs.state_dict` / :meth:`StatefulEpochs.load_state_dict`.

torchdata's ``StatefulDataLoader`` convention: a state is plain JSON-able values (``_resume`` encodes
and checks them); the loader records each epoch's delivered seqs (``Progress``) and, given a loaded
state, runs that epoch's remaining batches with their own seqs, so their own sampling streams.
The loader supplies the fields this mixin declares below.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..store._dataset import Dataset
from ..store._identity import dataset_identity
from ._config import LoaderConfig
from ._epoch_rule import OneEpochAtATime
from ._resume import Progress, check_facts, check_header, decode_progress, encode_progress, header, seeds_crc
from ._setup import LoaderSetup


class StatefulEpochs:
    """Where a loader is in its epochs, as a checkpoint records it (a mixin of the loader)."""

    config: LoaderConfig
    dataset: Dataset
    _setup: LoaderSetup
    _epoch: int
    _progress: Progress | None
    _resume: Progress | None
    _identity: dict[str, Any] | None
    _turn: OneEpochAtATime

    def state_dict(self) -> dict[str, Any]:
        """Where this loader is, as plain JSON-able values for a checkpoint (torchdata's
        ``StatefulDataLoader`` convention): the epoch, the seqs of its batches already handed to the
        caller, and the facts a loader must share to resume it (dataset identity, split, seed,
        batch size, fanouts, shuffle, drop_last, partitions, rank and world size, number of batches).

        Called inside the loop (or after leaving it early), it describes the epoch being iterated;
        after an epoch's last batch, the next epoch, from its start.  Give it to a fresh loader's
        :meth:`load_state_dict` to deliver the rest.  Without ``history=`` the remaining batches are
        the uninterrupted run's, byte for byte (``ordered=True``: in the same order too).  Not restored:
        the feature buffer (rows are read again, the same rows) and the history table, which starts
        empty: a resumed epoch keeps each batch's seq and seeds, but what sampling prunes by the
        table, and so the subgraphs and pulled rows, differ (they vary between uninterrupted runs
        with history too)."""
        progress = self._resume
        if progress is None and self._progress is not None and self._progress.epoch == self._epoch - 1 \
                and not self._progress.complete:
            progress = self._progress
        if progress is None:
            progress = Progress(epoch=self._epoch, num_batches=self._setup.items.num_batches(self._epoch))
        return {**header(), "epoch": progress.epoch, "delivered": encode_progress(progress.delivered),
                "facts": self._facts(progress.num_batches)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s ``state``: the next iteration runs its epoch with only the
        batches not yet delivered (their own seqs, so their own sampling streams), the one after
        continues normally.  Call it before iterating; a state of another dataset or setup is a
        :class:`CheckpointMismatchError` naming the field, a malformed one a :class:`CheckpointError`."""
        if self._turn.running:
            raise ConfigError("load_state_dict() while an epoch of this loader is being iterated; call it before "
                              "iterating (or after leaving the loop)")
        check_header(state)
        epoch = int(state["epoch"])
        num_batches = self._setup.items.num_batches(epoch)
        check_facts(state["facts"], self._facts(num_batches))
        delivered = decode_progress(state.get("delivered"), num_batches)
        progress = Progress(epoch=epoch, num_batches=num_batches, delivered=delivered)
        self._progress = None
        self._epoch = epoch + 1 if progress.complete else epoch
        self._resume = progress if delivered and not progress.complete else None

    def _facts(self, num_batches: int) -> dict[str, Any]:
        """What must match for a state to resume on this loader (``_resume.check_facts``)."""
        cfg, setup, part = self.config, self._setup, self._setup.partitioned
        if self._identity is None:  # read once (the manifest and 2 MiB of indices): not on every checkpoint
            self._identity = {f"dataset_{k}": v for k, v in dataset_identity(self.dataset).items()}
        identity = self._identity
        return {**identity, "num_seeds": len(setup.seeds), "seeds_crc32": seeds_crc(setup.seeds),
                "seed": cfg.seed, "batch_size": cfg.batch_size, "fanouts": list(cfg.fanouts), "shuffle": cfg.shuffle,
                "drop_last": cfg.drop_last, "partitions": cfg.partitions,
                "parts_per_batch": part.parts_per_batch if part is not None else None,
                "interleave": part.interleave if part is not None else None,
                "rank": setup.place.rank, "world_size": setup.place.world_size, "num_batches": num_batches}

"""The suites each station offers: stored when the station connects, listed to teams, read to check a job.

A station sends its ``StationOffer`` (suites.proto) on ``TakeJobs``; the relay stores it per station
(``Store.put_station_offer``, both SQLite and PostgreSQL) so every relay sharing the store lists the same suites
(``Evaluation.ListSuites``, any client token) and checks a submitted ``suite_job`` against them
(``job_request.check_submit``).
"""

from __future__ import annotations

from typing import Any, Optional

import grpc

from strands_robots.relay.auth import KIND_CLIENT
from strands_robots.relay.core import Refused, RelayCore, checked_text
from strands_robots.relay.text_limits import check_id
from strands_robots.wire.proto import suites_pb2 as sp

__all__ = ["SuiteOfferService", "store_offer", "offer_of"]


async def store_offer(core: RelayCore, station_id: str, offer: Any) -> None:
    """Keep ``offer`` (a ``StationOffer`` message) as ``station_id``'s latest."""
    await core.run(core.store.put_station_offer, station_id, offer.SerializeToString(deterministic=True),
                   core.clock_ms())


async def offer_of(core: RelayCore, station_id: str) -> Optional[Any]:
    """Return the ``job_model.offer.StationOffer`` ``station_id`` last sent (None: it has sent none)."""
    from strands_robots.wire.pb_model import station_offer_from_pb

    records = await core.run(core.store.station_offers, station_id)
    if not records:
        return None
    return station_offer_from_pb(station_id, sp.StationOffer.FromString(records[0].offer))


class SuiteOfferService:
    """The ``ListSuites`` RPC; the method table (``handlers.py``) binds it."""

    def __init__(self, core: RelayCore) -> None:
        self._core = core

    async def ListSuites(self, request: Any, context: Any) -> Any:
        core = self._core
        await core.principal(context, KIND_CLIENT)
        station_id = checked_text(check_id, request.station_id, "station_id")
        if station_id and station_id not in core.tokens.stations:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"station_id: unknown station {station_id!r}")
        records = await core.run(core.store.station_offers, station_id or None)
        return sp.ListSuitesResponse(stations=[
            sp.StationSuites(station_id=r.station_id, offer=sp.StationOffer.FromString(r.offer),
                             offered_unix_ms=r.offered_unix_ms) for r in records])

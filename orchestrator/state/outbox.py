"""The notifications waiting to be sent: recorded before they are sent, marked sent after.

A notification is written in the transaction of what it tells of (``Store.transition``'s ``notices``), so no event
is lost to a controller killed right after it; a sender claims it for ``CLAIM_SECONDS`` (one claim wins, on SQLite
and PostgreSQL alike: a compare-and-set on the row), so two replicas never send it together; it is marked sent once
the receiver took it. A sender killed between the receiver's answer and the mark sends it again once its claim runs
out: the body's ``id`` is the same in every try, for receivers that must see each event once."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select, update

from ..errors import CvmjobError
from .schema import notifications

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PgInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert

    from .store import Store

    Insert = SqliteInsert | PgInsert


class UnreadableNotification(CvmjobError):
    """A notification's row that record() did not write: what is wrong, and how to get rid of it."""


CLAIM_SECONDS = 60.0  # far longer than one send may take (notify/deliver.py's timeout)


@dataclass(frozen=True)
class NewNotification:
    subject: str  # the job id (or the study)
    key: str  # the event's id, one per event: with the target, what makes it once
    event: str
    target: dict[str, Any]  # the spec's NotifyTarget as JSON
    body: dict[str, Any]  # the json format's event


@dataclass(frozen=True)
class Notification:
    id: int
    subject: str
    key: str
    event: str
    target: dict[str, Any]
    body: dict[str, Any]
    state: str  # pending | sent | gave_up
    tries: int
    next_at: float
    sent_at: float | None
    last_error: str


def record(conn: Connection, insert: Insert, notices: Iterable[NewNotification], now: float) -> None:
    """Inside the caller's transaction: each notice once (``insert``: the store's INSERT of ``notifications`` in its
    dialect; a key and target recorded already stay as they were)."""
    for notice in notices:
        conn.execute(insert.values(
            subject=notice.subject, key=notice.key, event=notice.event,
            target=json.dumps(notice.target, sort_keys=True), body=json.dumps(notice.body, sort_keys=True),
            next_at=now, created_at=now).on_conflict_do_nothing())


def _decoded(row: Any) -> Notification:
    """A row as the senders and `cvmjob status` read it; UnreadableNotification, naming the row, for one whose
    documents are not what record() writes (only a hand's edit of the store gets there)."""
    return Notification(id=row.id, subject=row.subject, key=row.key, event=row.event,
                        target=_object(row, "target"), body=_object(row, "body"), state=row.state, tries=row.tries,
                        next_at=row.next_at, sent_at=row.sent_at, last_error=row.last_error)


def _object(row: Any, column: str) -> dict[str, Any]:
    try:
        document = json.loads(row._mapping[column])
    except (TypeError, ValueError) as exc:
        problem = f"{column} is not JSON: {exc}"
    else:
        if isinstance(document, dict):
            return document
        problem = f"{column} is not a JSON object"
    raise UnreadableNotification(
        f"notification {row.id} of {row.subject} in the store cannot be read ({problem}): it was changed outside "
        f"cvmjob. delete the row (DELETE FROM notifications WHERE id = {row.id}); the event it told of is not sent")


class Outbox:
    """The store's notifications, for the senders (notify/deliver.py) and for `cvmjob status`."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, notices: Iterable[NewNotification], now: float) -> None:
        """Notifications of something that is not a transition (a sweep's end), in a transaction of their own."""
        with self._store._write() as conn:
            record(conn, self._store._insert(notifications), notices, now)

    def of(self, subject: str) -> list[Notification]:
        with self._store._read() as conn:
            rows = conn.execute(select(notifications).where(notifications.c.subject == subject)
                                .order_by(notifications.c.id)).all()
        return [_decoded(row) for row in rows]

    def claim(self, owner: str, now: float, limit: int = 20, subjects: Iterable[str] | None = None
              ) -> list[Notification]:
        """Up to ``limit`` pending notifications that are due and nobody else holds, now held by ``owner``;
        ``subjects``: only those of these jobs."""
        query = select(notifications.c.id).where(
            notifications.c.state == "pending", notifications.c.next_at <= now, notifications.c.claimed_until <= now)
        if subjects is not None:
            query = query.where(notifications.c.subject.in_(list(subjects)))
        with self._store._read() as conn:
            candidates = [row.id for row in conn.execute(query.order_by(notifications.c.id).limit(limit))]
        claimed = []
        for id_ in candidates:
            with self._store._write() as conn:
                won = conn.execute(update(notifications).where(
                    notifications.c.id == id_, notifications.c.state == "pending",
                    notifications.c.claimed_until <= now,
                ).values(claimed_by=owner, claimed_until=now + CLAIM_SECONDS))
                if won.rowcount != 1:
                    continue
                try:
                    claimed.append(_decoded(conn.execute(select(notifications)
                                                         .where(notifications.c.id == id_)).one()))
                except UnreadableNotification as exc:  # given up with its reason: the rows after it are still sent
                    conn.execute(update(notifications).where(notifications.c.id == id_).values(
                        state="gave_up", claimed_until=0.0, last_error=str(exc)[:500]))
        return claimed

    def sent(self, id_: int, owner: str, now: float) -> None:
        with self._store._write() as conn:
            conn.execute(update(notifications).where(notifications.c.id == id_, notifications.c.claimed_by == owner)
                         .values(state="sent", tries=notifications.c.tries + 1, sent_at=now, claimed_until=0.0))

    def failed(self, id_: int, owner: str, error: str, retry_at: float | None) -> None:
        """A try that did not land: retried at ``retry_at``, or given up (None)."""
        with self._store._write() as conn:
            conn.execute(update(notifications).where(notifications.c.id == id_, notifications.c.claimed_by == owner)
                         .values(state="pending" if retry_at is not None else "gave_up",
                                 tries=notifications.c.tries + 1, next_at=retry_at or 0.0, claimed_until=0.0,
                                 last_error=error[:500]))

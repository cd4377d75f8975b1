"""The `comments` table: people's notes on a task, read by Claude before its next run; the
scheduler's reply and action are written back on the same row."""

from __future__ import annotations

from collections.abc import Sequence

from .db import Tables

CommentRow = dict[str, object]


class CommentsTable(Tables):
    def add_comment(self, task_id: str, author: str, text: str, now: float) -> int:
        with self.write() as db:
            cur = db.execute(
                "INSERT INTO comments(task_id, author, body, created_at) VALUES (?, ?, ?, ?)",
                (task_id, author, text, now),
            )
            return int(cur.lastrowid or 0)

    def comments(self, task_id: str, unread_only: bool = False) -> list[CommentRow]:
        """A task's comments, oldest first."""
        unread = " AND read_at IS NULL" if unread_only else ""
        return self._rows(f"SELECT * FROM comments WHERE task_id = ?{unread} ORDER BY id",
                          (task_id,))

    def has_unread(self, task_id: str) -> bool:
        """One indexed lookup: the usual answer, no, costs nothing more."""
        return self.connect().execute(
            "SELECT 1 FROM comments WHERE task_id = ? AND read_at IS NULL LIMIT 1", (task_id,)
        ).fetchone() is not None

    def answer_comments(self, ids: Sequence[int], now: float, reply: str, action: str) -> None:
        with self.write() as db:
            db.executemany(
                "UPDATE comments SET read_at = ?, reply = ?, action = ? WHERE id = ?",
                [(now, reply, action, i) for i in ids],
            )

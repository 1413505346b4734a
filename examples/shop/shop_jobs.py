"""The shop's job types, imported by every worker (``JOB_HANDLER_MODULES=shop_jobs``)."""

from __future__ import annotations

from typing import Any

from shop_models import Order, db

from dashboard.jobs import JobContext, handler


@handler("shop.send_receipt", max_attempts=5, timeout=30)
def send_receipt(ctx: JobContext) -> dict[str, Any]:
    """Mark the order's receipt as sent (a real shop would send an e-mail here).

    Idempotent, as every handler must be: a retry after a crash finds it already sent.
    """
    order = db.session.get(Order, ctx.payload["order_id"])
    if order is None:  # cannot happen: the job was written in the order's own transaction
        raise LookupError(f"no order {ctx.payload['order_id']}")
    if ctx.lost:  # the attempt ran past its timeout: stop, its result would be refused
        return {"order_id": order.id, "stopped": True}
    order.receipt_sent = True
    db.session.commit()
    return {"order_id": order.id, "receipt": "sent"}

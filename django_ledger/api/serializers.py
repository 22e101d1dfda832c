"""Plain serializers: they validate what clients send and document what they get.

Times on records are epoch milliseconds of the Redis server clock; durations sent
(``delay``, ``lease``) are seconds, fractions allowed. Text is taken exactly as sent:
no trimming, NUL allowed in payloads; request ids and owners are judged by the ledger
itself, so the API refuses them with the ledger's own reason codes.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from django.utils.translation import gettext, gettext_lazy
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from ..core.ledger import MAX_BATCH
from ..core.records import State
from ..core.timing import MAX_DURATION_MS

__all__ = [
    "AdmissionBatchSerializer",
    "AdmissionSerializer",
    "AdmitBatchSerializer",
    "AdmitSerializer",
    "ClaimListSerializer",
    "ClaimRequestSerializer",
    "ClaimSerializer",
    "DispatchCheckSerializer",
    "DispatchClaimResultSerializer",
    "DispatchClaimSerializer",
    "DispatchLogSerializer",
    "DispatchQuerySerializer",
    "DispatchSerializer",
    "ErrorSerializer",
    "GateSerializer",
    "GateStateSerializer",
    "QuarantinedSerializer",
    "QueueListSerializer",
    "QueueSerializer",
    "RecordListQuerySerializer",
    "RecordSerializer",
    "RenewBatchSerializer",
    "RenewSerializer",
    "RepairReportSerializer",
    "RepairSerializer",
    "ResolutionListSerializer",
    "ResolutionSerializer",
    "ResolveQuerySerializer",
    "SettleBatchSerializer",
    "SettleSerializer",
    "SettlementBatchSerializer",
    "SettlementSerializer",
    "StatsSerializer",
    "TokenRequestSerializer",
    "TokenSerializer",
]

MAX_SECONDS = MAX_DURATION_MS / 1000
#: The latest fire time a dispatch may name (9999-12-31T23:59:59Z).
MAX_EPOCH_SECONDS = 253_402_300_799
#: The largest repair cursor: Redis's HSCAN cursor is an unsigned 64-bit number.
MAX_CURSOR = 2**64 - 1
STATES = [state.value for state in State]


class TextField(serializers.CharField):
    """A string taken exactly as sent: no trimming, no coercion of numbers, NUL kept.

    Lone surrogates (which JSON can escape but UTF-8 cannot hold) are refused by one
    encode in C rather than by DRF's per-character validator: payloads are large.
    """

    default_error_messages = {
        "surrogate": gettext_lazy("Lone surrogate characters are not allowed.")
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(
                validator, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator
            )
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            self.fail("surrogate")
        return data


class RequestIdField(TextField):
    """A request id: the ledger judges it, an empty one included (``id_empty``).

    An empty id thus answers the same code wherever it is sent (the body, the
    ``Idempotency-Key`` header, a batch item); the schema still says ``minLength: 1``.
    """

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data == "":
            return ""  # not DRF's "blank": the ledger refuses it as id_empty
        return super().run_validation(data)


def seconds(*, positive: bool = False, **kwargs: Any) -> serializers.FloatField:
    """A duration in seconds, as the ledger takes it (at most about 100 years)."""
    return serializers.FloatField(
        min_value=0.001 if positive else 0, max_value=MAX_SECONDS, **kwargs
    )


# -- what clients get -------------------------------------------------------------------


class RecordSerializer(serializers.Serializer[Any]):
    """One record as the ledger holds it; instants in epoch milliseconds."""

    request_id = serializers.CharField()
    payload = serializers.CharField()
    state = serializers.ChoiceField(choices=STATES)
    due_at = serializers.IntegerField()
    owner = serializers.CharField(help_text="The claiming owner; empty unless CLAIMED.")
    attempts = serializers.IntegerField(help_text="Claims so far.")
    fence = serializers.IntegerField(help_text="Grows with every claim of this record.")
    lease_until = serializers.IntegerField(allow_null=True)
    created_at = serializers.IntegerField()
    updated_at = serializers.IntegerField()
    traceparent = serializers.CharField(allow_null=True)
    priority = serializers.IntegerField(
        help_text="-100 to 100: among records due now, a higher one is claimed first."
    )


class AdmissionSerializer(serializers.Serializer[Any]):
    """The answer to one admission; ``record`` is the stored record when there is one."""

    request_id = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["ADMITTED", "DUPLICATE", "CONFLICT", "FULL", "REJECTED"]
    )
    reason = serializers.CharField(
        allow_null=True, help_text="Why it was not accepted: a stable code, or null."
    )
    record = RecordSerializer(allow_null=True)


class AdmissionBatchSerializer(serializers.Serializer[Any]):
    results = AdmissionSerializer(many=True, help_text="One per item, in the order sent.")


class ClaimSerializer(serializers.Serializer[Any]):
    """A record handed to ``owner`` until ``lease_until``, with the token to settle it."""

    token = serializers.CharField(help_text="Opaque: send it back to renew or settle.")
    request_id = serializers.CharField()
    payload = serializers.CharField()
    owner = serializers.CharField()
    attempt = serializers.IntegerField()
    fence = serializers.IntegerField()
    lease_until = serializers.IntegerField()
    traceparent = serializers.CharField(allow_null=True)


class ClaimListSerializer(serializers.Serializer[Any]):
    claims = ClaimSerializer(many=True)


class SettlementSerializer(serializers.Serializer[Any]):
    """The answer to a renewal or settlement; ``reason`` says why a claim was LOST."""

    status = serializers.ChoiceField(choices=["RENEWED", "SETTLED", "LOST"])
    reason = serializers.CharField(allow_null=True)
    record = RecordSerializer(allow_null=True)


class SettlementBatchSerializer(serializers.Serializer[Any]):
    results = SettlementSerializer(many=True, help_text="One per item, in the order sent.")


class ResolutionSerializer(serializers.Serializer[Any]):
    request_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["FOUND", "MISSING", "CORRUPT"])
    record = RecordSerializer(allow_null=True)
    reason = serializers.CharField(allow_null=True, help_text="Why a CORRUPT record fails.")


class ResolutionListSerializer(serializers.Serializer[Any]):
    results = ResolutionSerializer(many=True, help_text="One per id, in the order asked.")


class StatsSerializer(serializers.Serializer[Any]):
    """Counters of one queue, read from its indexes in one consistent snapshot."""

    queue = serializers.CharField()
    pending_due = serializers.IntegerField()
    pending_later = serializers.IntegerField()
    claimed = serializers.IntegerField()
    expired_leases = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    dead = serializers.IntegerField()
    quarantined = serializers.IntegerField()
    total = serializers.IntegerField()
    gate_closed = serializers.BooleanField()
    now = serializers.IntegerField(help_text="The Redis server clock, epoch ms.")
    oldest_due_age_ms = serializers.IntegerField(allow_null=True)
    demand = serializers.IntegerField(
        help_text=(
            "Records due now plus records claimed (pending_due + claimed): the number an "
            "autoscaler scales workers on; 0 only when nothing is due or running."
        )
    )


class QuarantinedSerializer(serializers.Serializer[Any]):
    """One quarantined id: the bytes that failed to decode, shown safely."""

    request_id = serializers.CharField()
    size = serializers.IntegerField()
    raw_base64 = serializers.CharField(help_text="Every quarantined byte, base64.")
    preview = serializers.CharField(help_text="The first bytes, undecodable ones escaped.")
    error = serializers.CharField(
        allow_null=True, help_text="Why they fail; null once they decode."
    )


class RepairCountsSerializer(serializers.Serializer[Any]):
    scanned = serializers.IntegerField()
    reindexed = serializers.IntegerField()
    expired = serializers.IntegerField()
    dead = serializers.IntegerField()
    quarantined = serializers.IntegerField()
    purged = serializers.IntegerField()
    stale = serializers.IntegerField()


class RepairReportSerializer(serializers.Serializer[Any]):
    cursor = serializers.CharField(help_text='Send it back for the next page; "0" ends a cycle.')
    done = serializers.BooleanField(help_text="True when this page ended a full cycle.")
    counts = RepairCountsSerializer()


class GateStateSerializer(serializers.Serializer[Any]):
    gate_closed = serializers.BooleanField()


class QueueSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    actions = serializers.ListField(child=serializers.CharField())


class QueueListSerializer(serializers.Serializer[Any]):
    queues = QueueSerializer(many=True)


class DispatchSerializer(serializers.Serializer[Any]):
    """One dispatch of one cron fire; times in epoch seconds."""

    key = serializers.CharField()
    fire_time = serializers.IntegerField()
    dispatched_at = serializers.IntegerField()
    node_id = serializers.CharField()
    status = serializers.CharField()


class DispatchCheckSerializer(serializers.Serializer[Any]):
    dispatched = serializers.BooleanField()


class DispatchClaimResultSerializer(serializers.Serializer[Any]):
    won = serializers.BooleanField()
    dispatch = DispatchSerializer()


class TokenSerializer(serializers.Serializer[Any]):
    token = serializers.CharField(help_text="Send it as `Authorization: Token <token>`.")


class ErrorDetailSerializer(serializers.Serializer[Any]):
    code = serializers.CharField(help_text="Stable: branch on it.")
    message = serializers.CharField(help_text="For people.")
    details = serializers.JSONField(allow_null=True)


class ErrorSerializer(serializers.Serializer[Any]):
    """Every refusal."""

    error = ErrorDetailSerializer()


# -- what clients send ------------------------------------------------------------------


class AdmitSerializer(serializers.Serializer[Any]):
    request_id = RequestIdField(
        required=False,
        help_text="The request's stable id; or send it as the Idempotency-Key header.",
    )
    payload = TextField(allow_blank=True)
    delay = seconds(default=0, help_text="Seconds before the request is due.")
    traceparent = serializers.CharField(required=False, allow_null=True, default=None)
    priority = serializers.IntegerField(
        required=False,
        default=0,
        min_value=-100,
        max_value=100,
        help_text="-100 to 100: among requests due now, a higher priority is claimed first.",
    )


class AdmitItemSerializer(AdmitSerializer):
    request_id = RequestIdField()


class AdmitBatchSerializer(serializers.Serializer[Any]):
    items = AdmitItemSerializer(many=True, allow_empty=False)


class ClaimRequestSerializer(serializers.Serializer[Any]):
    owner = TextField(help_text="Who holds the lease: a worker's name.")
    limit = serializers.IntegerField(min_value=1, max_value=MAX_BATCH, default=1)
    lease = seconds(positive=True, required=False, help_text="Default: the queue's LEASE.")


class RenewSerializer(serializers.Serializer[Any]):
    token = TextField()
    lease = seconds(positive=True, required=False, help_text="Default: the queue's LEASE.")


class RenewBatchSerializer(serializers.Serializer[Any]):
    items = RenewSerializer(many=True, allow_empty=False)


class SettleSerializer(serializers.Serializer[Any]):
    token = TextField()
    state = serializers.ChoiceField(
        choices=["COMPLETED", "FAILED", "PENDING"],
        default="COMPLETED",
        help_text="COMPLETED or FAILED end the record; PENDING gives it back for a retry.",
    )
    delay = seconds(default=0, help_text="For PENDING: seconds before it is due again.")


class SettleBatchSerializer(serializers.Serializer[Any]):
    items = SettleSerializer(many=True, allow_empty=False)


class ResolveQuerySerializer(serializers.Serializer[Any]):
    ids = serializers.ListField(child=TextField(), allow_empty=False, max_length=MAX_BATCH)


class RecordListQuerySerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=STATES, default="PENDING")
    order = serializers.ChoiceField(choices=["oldest", "newest"], default="oldest")


class RepairSerializer(serializers.Serializer[Any]):
    cursor = serializers.RegexField(
        r"^[0-9]{1,20}(\.[0-9]{1,20})?$",
        default="0",
        help_text='"0", or the cursor the last page answered ("<shard>.<cursor>" when sharded).',
    )
    count = serializers.IntegerField(min_value=1, max_value=10_000, default=100)

    def validate_cursor(self, value: str) -> str:
        # Redis's HSCAN cursor is an unsigned 64-bit number: a larger one is an error there.
        if any(int(part) > MAX_CURSOR for part in value.split(".")):
            raise serializers.ValidationError(
                gettext("A cursor is at most %(max)s.") % {"max": MAX_CURSOR}
            )
        return value


class GateSerializer(serializers.Serializer[Any]):
    closed = serializers.BooleanField()


class DispatchQuerySerializer(serializers.Serializer[Any]):
    key = TextField()
    fire_time = serializers.IntegerField(
        min_value=0, max_value=MAX_EPOCH_SECONDS, help_text="Epoch seconds."
    )


class DispatchClaimSerializer(DispatchQuerySerializer):
    node_id = TextField(required=False, help_text="Default: this server's node id.")


class DispatchLogSerializer(DispatchClaimSerializer):
    status = TextField(default="dispatched")


class CredentialField(serializers.CharField):
    """A username or password exactly as typed: no trimming, no number read as text.

    NUL and lone surrogates stay refused, as Django's own login form refuses them.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class TokenRequestSerializer(serializers.Serializer[Any]):
    username = CredentialField(max_length=255)
    password = CredentialField(max_length=4096, style={"input_type": "password"})

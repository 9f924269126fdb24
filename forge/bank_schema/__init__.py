"""The bank's schema, in one place below ``forge.db`` and ``forge.kernelbank``: its revisions and
what each brings, the evidence keys the runtime reads (``layout``), and the runtime's read-only
reader with its plain drivers (``reader``) filling typed records (``records``). ``forge.db``
writes by the same names; ``forge.kernelbank`` reads through here and holds no SQL."""

from forge.bank_schema.layout import REVISIONS, EvidenceKey, RevisionFeatures, features
from forge.bank_schema.reader import ReadOnlyBank, connect_readonly
from forge.bank_schema.records import InstanceRecord, KernelEntry, OpRecord, PlanEntry

__all__ = [
    "REVISIONS",
    "EvidenceKey",
    "InstanceRecord",
    "KernelEntry",
    "OpRecord",
    "PlanEntry",
    "ReadOnlyBank",
    "RevisionFeatures",
    "connect_readonly",
    "features",
]

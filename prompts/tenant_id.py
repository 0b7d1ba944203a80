"""A card's tenant id: the one rule for every place that names a tenant.

The API's tenant routes, `cardloop tenant ...`, [tenants.<t>] and the gateway all check a tenant
with `is_tenant_id`. Lower case only, because a tenant id names a folder, a Temporal search
attribute and a row-level security scope, where "ACME" and "acme" must not become two tenants.
A module of its own (re only) so the CLI's argument checks do not load the card models.
"""

from __future__ import annotations

import re

TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
MAX_TENANT_CHARS = 100
TENANT_RULE = (f"use lower-case letters, digits, '_' and '-' (at most {MAX_TENANT_CHARS}, "
               "starting with a letter or digit), as a card's tenant")


def is_tenant_id(value: object) -> bool:
    """True when a card would take `value` as its tenant. fullmatch, not match: `$` also
    matches before a trailing newline, and "acme\\n" is no tenant."""
    return (isinstance(value, str) and 1 <= len(value) <= MAX_TENANT_CHARS
            and re.fullmatch(TENANT_PATTERN, value) is not None)

from tests.cardloop.store.tenant_kit import cluster

__all__ = ["cluster"]

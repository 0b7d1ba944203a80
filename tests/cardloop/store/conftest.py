from tests.cardloop.store.store_kit import cluster

__all__ = ["cluster"]

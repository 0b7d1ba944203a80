"""Board webhooks: signature verification and one adapter per board, each turning the
board's own payload into canonical events (cardloop/boards/events.py)."""

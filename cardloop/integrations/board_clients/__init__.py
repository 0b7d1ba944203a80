"""Board clients: a card's progress written back to its board, one client per board behind one
interface (base.BoardClient), built by registry.client_for. Plain clients: no Temporal here."""

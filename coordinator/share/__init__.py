"""Share groups (KIP-932), the group coordinator's side: for now the simple share assignor
(assignor.py). The share-partition state lives with the share coordinator (kcoord.share)."""

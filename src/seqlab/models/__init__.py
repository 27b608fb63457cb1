"""Task models: each maps a batch to logits (and state), never to a loss."""

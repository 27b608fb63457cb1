"""Files -> tokens -> ids -> batches."""

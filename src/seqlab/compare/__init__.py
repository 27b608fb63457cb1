"""`seqlab compare`: every architecture trained on the user's task under one budget, and one report."""

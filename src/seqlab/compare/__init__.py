"""seqlab compare: every architecture on the user's task under one budget, and one report."""

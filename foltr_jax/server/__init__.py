"""The server's side of a round: the aggregation rules, the attacks and the pipeline that
chains them (attack, privacy, aggregation, server optimiser).  On the core layer only."""

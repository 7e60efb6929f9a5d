"""The methods, one folder each, on the engine: ``fpdgd`` (FPDGD and centralised PDGD),
``foltr_es``, ``fedips`` and ``unlearning`` (the unlearning protocol, on FPDGD).  A new
method is a folder here (see the how-to "Add a method")."""

"""FPDGD (Wang et al. 2021) and centralised PDGD in one place: its config (``config``),
the client plans (``client_plan``), the lanes of a round (``lanes``), the PDGD update
(``pdgd``), the round (``rounds``) and the build and run (``federation``)."""

"""The encdec profile's suite (SPEC §6.2): one test module per area, the
oracles (``oracles``), the declared conventions (``conventions``) and the
pinned and random cases (``cases``)."""

"""An adapter with no functions: used to collect the test list when the
implementation under test kills the process while being imported."""

"""lmspec conformance suite: grades any implementation of shared/SPEC.md
through the adapter interface (SPEC §5). See docs/CONTRIBUTING-suite.md."""

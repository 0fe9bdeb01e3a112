"""The untrusted side of lmspec: a small server that imports the
implementation under test and answers the judge's calls (server.py) in the
wire format of protocol.py.

It runs in its own process, normally inside a bubblewrap sandbox, from a
read-only copy of this folder mounted as the package ``lmspec_worker``; so
every import here is relative and nothing of the rest of lmspec (the suite,
its oracles, the reference) is imported or even visible. It needs Python
3.11+, torch, numpy, msgpack and safetensors in the interpreter that runs it.
"""

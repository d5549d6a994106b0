"""simulator: flow-level replay of a placed job's collective traffic with ECMP hashing.

Not built yet: tracked by issue #5. Importing it gives nothing but this docstring.
"""

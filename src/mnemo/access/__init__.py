"""Identity and access: who is calling and what they may do.

``caller.py`` holds the caller of the running call (set per request by a network transport);
``rules.py`` the rules between users that the engine applies to it; ``keys.py`` the API key ring;
``request_ledger.py`` rate limits and idempotency keys, kept in the store. Nothing here imports
a transport or a driver.
"""

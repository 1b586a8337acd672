"""The engine: the domain operations of mnemo, the only place with business rules.

Each module holds one family of operations as a class over ``ServiceBase`` (the storage, clock
and embedder they work on); ``mnemo.engine.service.MemoryService`` puts them together. None of them
imports a driver or a transport.
"""

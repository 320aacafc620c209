"""The concerns of the actor cell, one module each (after Akka's ``dungeon`` package).

``gactors._cell.ActorCell`` mixes them together:

* :mod:`.children` - the children container, names, stopping children;
* :mod:`.deathwatch` - watch/unwatch and ``Terminated`` delivery;
* :mod:`.dispatch` - the mailbox, the slow paths of ``tell``, the system queue;
* :mod:`.faulthandling` - suspend/resume, failure reports, restart, stop;
* :mod:`.receivetimeout` - the idle timer (``ReceiveTimeoutTimer``).

The message loop itself (system queue first, then a batch of user messages) is the
worker loop of ``gactors._dispatch``. "Where does a restart happen?" -
``FaultHandling.fault_recreate`` and ``finish_recreate``, nowhere else.
"""

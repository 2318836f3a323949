"""verl bridge: the target of reasonrl's ``verl.plugins`` entry point.

verl imports every ``verl.plugins`` entry point at the end of ``import verl`` (in the driver
and in every Ray worker) but only logs failures at debug level. Importing this module is
the whole action: it applies reasonrl's verl patches and registrations and prints any
failure to stderr itself. ``reasonrl train`` then checks :data:`STATUS` and stops on error.
"""

from reasonrl.bridges import run_bridge

STATUS = run_bridge("verl")

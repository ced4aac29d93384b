"""``kgm group``: list the groups of a cluster, describe one (consumer, classic or share), watch it.

* :mod:`.model`: the one shape of a listed and a described group, and its JSON (sans-I/O);
* :mod:`.fetch`: where each fact comes from (the SDK's own wire codecs for ListGroups, share
  groups and KIP-848 consumer groups; confluent-kafka's AdminClient for classic groups and
  committed offsets; the module docstring says why);
* :mod:`.render`: text tables and JSON;
* :mod:`.watch`: ``kgm group watch``: what changed between two descriptions, the same as a
  rebalance timeline of the testing kit, and the refresh loop;
* :mod:`.command`: the argparse commands, options as Kafka's tools spell them.

Adding a fact (e.g. a consumer group's lag) means a field in the model, where it is fetched, and
a column in the text output.
"""

from .command import add_group_commands

__all__ = ["add_group_commands"]

"""Configuration: MirrorMaker 2's ``mm2.properties``, read the way MM2 reads it.

* :class:`MirrorConfig` / :class:`FlowConfig` — clusters, flows, precedence, typed settings,
  filters and librdkafka client settings (:mod:`mirrorlib.config.mirror`);
* :mod:`mirrorlib.config.keys` — the registry of every MM2 key and its status in mirrorlib;
* :mod:`mirrorlib.config.properties` — Java ``.properties`` syntax and config providers;
* :mod:`mirrorlib.config.clients` — Java client settings → librdkafka;
* :mod:`mirrorlib.config.filters` — MM2's regex-list topic, group and config-property filters.
"""

from mirrorlib.config.clients import ClientSettings, DroppedSetting, translate_client_settings
from mirrorlib.config.filters import (
    ConfigPropertyFilter,
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    GroupFilter,
    RegexList,
    TopicFilter,
)
from mirrorlib.config.keys import KEYS, KeySpec, KeyType, Scope, Status, render_markdown_table
from mirrorlib.config.mirror import ConfigWarning, FlowConfig, MirrorConfig
from mirrorlib.config.properties import parse_properties, read_properties_file

__all__ = [
    "KEYS",
    "ClientSettings",
    "ConfigPropertyFilter",
    "ConfigWarning",
    "DefaultConfigPropertyFilter",
    "DefaultGroupFilter",
    "DefaultTopicFilter",
    "DroppedSetting",
    "FlowConfig",
    "GroupFilter",
    "KeySpec",
    "KeyType",
    "MirrorConfig",
    "RegexList",
    "Scope",
    "Status",
    "TopicFilter",
    "parse_properties",
    "read_properties_file",
    "render_markdown_table",
    "translate_client_settings",
]

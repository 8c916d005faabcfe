"""Configuration: MirrorMaker 2's ``mm2.properties``, read the way MM2 reads it.

* :class:`MirrorConfig` / :class:`FlowConfig` — clusters, flows, typed settings, filters and
  librdkafka client settings (:mod:`mirrorlib.core.config.mirror`, :mod:`mirrorlib.core.config.flow`);
* :mod:`mirrorlib.core.config.precedence` — MM2's precedence: which written key sets a cluster's,
  a client's or a flow's setting;
* :mod:`mirrorlib.core.config.build` — ``MirrorMakerConfig``'s logic: properties → the model,
  validation and warnings (:class:`ConfigWarning`);
* :mod:`mirrorlib.core.config.keys` — the registry of every MM2 key and its status in mirrorlib;
* :mod:`mirrorlib.core.config.properties` — Java ``.properties`` syntax and config providers;
* :mod:`mirrorlib.core.config.clients` — Java client settings → librdkafka;
* :mod:`mirrorlib.core.config.filters` — MM2's regex-list topic, group and config-property filters.
"""

from mirrorlib.core.config.build import ConfigWarning
from mirrorlib.core.config.clients import ClientSettings, DroppedSetting, translate_client_settings
from mirrorlib.core.config.filters import (
    ConfigPropertyFilter,
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    GroupFilter,
    RegexList,
    TopicFilter,
)
from mirrorlib.core.config.flow import FlowConfig
from mirrorlib.core.config.keys import KEYS, KeySpec, KeyType, Scope, Status, render_markdown_table
from mirrorlib.core.config.mirror import MirrorConfig
from mirrorlib.core.config.properties import parse_properties, read_properties_file

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

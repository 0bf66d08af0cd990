"""The core assembled: store, clock, event hub, identities, lifecycle, clock loop and relay.

The entry point builds the store and the notifiers and hands them in; nothing here knows which
database or chat platform is behind them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.admin import Admin
from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.events import EventHub
from bot.ports import Notifier, Store
from bot.profiles import with_builtins
from bot.relay import OutboxRelay
from bot.scheduler import Scheduler
from bot.service import ApprovalService, DecisionSettings, Profile


def decision_settings(settings: Settings) -> DecisionSettings:
    d = settings.decisions
    return DecisionSettings(d.park_ttl, d.question_ttl, tuple(d.nudge_before))


def profiles(settings: Settings) -> dict[str, Profile]:
    """The configured profiles, over the built-in ones (bot/profiles.py)."""
    return with_builtins(
        {
            name: Profile(
                p.approval_mode,
                list(p.approval_rules),
                p.tool_names,
                dict(p.aliases),
                list(p.approval_requirements),
                p.forbid_self_approval,
                list(p.shell_commands),
            )
            for name, p in settings.profiles.items()
        }
    )


@dataclass
class Core:
    store: Store
    clock: Clock
    hub: EventHub
    admin: Admin
    service: ApprovalService
    scheduler: Scheduler
    relay: OutboxRelay
    notifiers: dict[str, Notifier] = field(default_factory=dict)

    @classmethod
    async def build(
        cls,
        store: Store,
        settings: Settings,
        *,
        clock: Clock | None = None,
        notifiers: Mapping[str, Notifier] | None = None,
    ) -> Core:
        clock = clock or SystemClock()
        hub = EventHub()
        admin = Admin(store, clock)
        notifiers = dict(notifiers or {})
        service = ApprovalService(
            store,
            clock,
            settings=decision_settings(settings),
            profiles=profiles(settings),
            channels=sorted(notifiers),
            hub=hub,
            secret=await admin.instance_secret(),
        )
        scheduler = Scheduler(service, clock)
        relay = OutboxRelay(store, clock, notifiers)
        service.on_outbox = relay.wake
        return cls(store, clock, hub, admin, service, scheduler, relay, notifiers)

    def start(self) -> None:
        self.scheduler.start()
        self.relay.start()

    async def stop(self) -> None:
        await self.scheduler.stop()
        await self.relay.stop()

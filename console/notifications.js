// @ts-check
/**
 * The Notifications page: the in-app alert feed, the caller's channels (every kind), the
 * category × channel subscription grid and the organization's defaults. Channels, grid and feed
 * are the caller's own (notifications:write edits them; a viewer holds it too); the defaults
 * need notifications:admin and are read-only with the reason otherwise.
 */
import { api } from "./api.js";
import { h } from "./dom.js";
import { explain } from "./forms.js";
import { channelsSection } from "./notifications-channels.js";
import { allPages } from "./notifications-data.js";
import { feedSection } from "./notifications-feed.js";
import { defaultsSection, gridSection } from "./notifications-grid.js";

/** @param {HTMLElement} main @param {import("./app.js").Ctx} ctx */
export async function notificationsPage(main, ctx) {
  document.title = "Notifications · Workspace";
  const heading = h("h1", { tabindex: "-1" }, "Notifications");
  main.replaceChildren(heading, h("p", { role: "status" }, "Loading…"));
  if (!ctx.can("notifications:read")) {
    main.replaceChildren(
      heading,
      h("p", { role: "alert" }, `Your role (${ctx.role ?? "none"}) in this organization cannot see notifications (it needs notifications:read).`),
    );
    return;
  }
  const canWrite = ctx.can("notifications:write");
  const canAdmin = ctx.can("notifications:admin");
  /** @type {[import("./notifications-data.js").Category[], import("./notifications-data.js").Channel[], import("./notifications-data.js").Subscription[], import("./notifications-data.js").OrgDefault[]]} */
  let data;
  try {
    data = await Promise.all([
      api("GET", "/notifications/categories").then((r) => r.items),
      allPages("/notifications/channels"),
      allPages("/notifications/subscriptions"),
      api("GET", "/notifications/defaults").then((r) => r.items),
    ]);
  } catch (e) {
    main.replaceChildren(heading, h("p", { role: "alert" }, explain(e)));
    return;
  }
  const [categories, channels, subscriptions, defaults] = data;
  const labels = new Map(categories.map((c) => [c.id, c.label]));

  const readOnly = canWrite
    ? null
    : h(
        "p",
        { class: "note", id: "notifications-read-only" },
        `Read-only: your role in this organization is ${ctx.role ?? "unknown"}, which does not include notifications:write.`,
      );
  const feed = feedSection({ canWrite, categoryLabel: (id) => labels.get(id) ?? id });
  let grid = gridSection({ canWrite, categories, channels, subscriptions });
  const list = channelsSection({
    canWrite,
    channels,
    // A channel added, deleted or changed: its column in the grid follows.
    onChanged: async () => {
      try {
        const [fresh, subs] = await Promise.all([allPages("/notifications/channels"), allPages("/notifications/subscriptions")]);
        list.render(fresh);
        const next = gridSection({ canWrite, categories, channels: fresh, subscriptions: subs });
        grid.replaceWith(next);
        grid = next;
      } catch (e) {
        grid.replaceChildren(h("h2", { id: "grid-heading" }, "What you receive, where"), h("p", { role: "alert" }, explain(e)));
      }
    },
  });
  main.replaceChildren(heading, readOnly ?? "", feed.section, grid, list.section, defaultsSection({ canAdmin, role: ctx.role, categories, defaults }));
  await feed.ready;
}

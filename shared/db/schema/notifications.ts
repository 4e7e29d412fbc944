/** Notifications: channels, subscriptions, org defaults, deliveries and the outbox. */
export {};

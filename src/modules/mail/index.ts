/** The mail module as the app and other modules use it: import nothing else of it (lint: docs/architecture.md). */
export { default as outbox } from './outbox.js'
export { default as mailSender, type Mail, type Prepare, type Prepared } from './sender.js'
export type { Message } from './transport.js'
export { prepareSecurityNotice, SECURITY_NOTICE_KIND, SECURITY_NOTICE_WINDOW_MS, type SecurityEvent, type SecurityNotice } from './notices.js'

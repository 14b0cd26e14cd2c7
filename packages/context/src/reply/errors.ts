/**
 * Errors of the reply decorators. Request errors carry the 4xx the client earned (the
 * service's error handler turns them into problem details); programming and configuration
 * errors carry 500. Each is a constructor made by @fastify/error: test with `instanceof` or
 * by `code`.
 */
import createError from '@fastify/error'

/** An option of the context plugin has a wrong type or value; the message names it. */
export const ContextOptionError = createError('FST_CONTEXT_INVALID_OPTION', 'context: %s', 500, TypeError)

/** A decorator was called with an argument it cannot use (a programming error). */
export const ContextArgumentError = createError('FST_CONTEXT_INVALID_ARGUMENT', '%s', 500, TypeError)

/** `write`, `writef` or `writeString` after the reply was sent. */
export const ReplyAlreadySentError = createError('FST_CONTEXT_REPLY_SENT', 'Cannot %s: the reply was already sent', 500)

/** `jsonp(data, callback)` with a callback that is not a JavaScript identifier or dotted path. */
export const JsonpCallbackError = createError('FST_CONTEXT_INVALID_JSONP_CALLBACK', 'Invalid JSONP callback name', 400)

/** `serveFile`/`downloadFile` without the `files.root` option. */
export const FileRootMissingError = createError(
  'FST_CONTEXT_FILE_ROOT_MISSING',
  'reply.%s needs the context plugin option files.root (the folder files are served from)',
  500
)

/** `serveFile`/`downloadFile`: the path leaves the files root (or names a dotfile with dotfiles "deny"). */
export const FileForbiddenError = createError('FST_CONTEXT_FILE_FORBIDDEN', 'Forbidden path', 403)

/** `serveFile`/`downloadFile`: no such file (or a directory, or an ignored dotfile). */
export const FileNotFoundError = createError('FST_CONTEXT_FILE_NOT_FOUND', 'File not found', 404)

/** `serveFile`/`downloadFile`: another failure reported by @fastify/send (412, 416, 400, 500). */
export const FileSendError = createError<[string]>('FST_CONTEXT_FILE_SEND', '%s', 500)

/** `render` without @fastify/view (no `views` option and no @fastify/view registered). */
export const ViewsNotConfiguredError = createError(
  'FST_CONTEXT_VIEWS_NOT_CONFIGURED',
  'reply.render needs the context plugin option views.root, or @fastify/view registered before the context plugin',
  500
)

/** `redirectToRoute` without the routing plugin (@user-product-service/routing), which owns route names. */
export const RoutingPluginMissingError = createError(
  'FST_CONTEXT_ROUTING_MISSING',
  'reply.redirectToRoute needs the routing plugin (@user-product-service/routing) registered',
  500
)

/** `saveFile`/`saveFileToStorage`: a destination with `..` segments or a NUL byte. */
export const UnsafeUploadPathError = createError('FST_CONTEXT_UNSAFE_UPLOAD_PATH', 'Unsafe upload path: %s', 400)

/** `saveFile`/`saveFileToStorage`: the upload was cut at the multipart file size limit. */
export const UploadTooLargeError = createError('FST_CONTEXT_UPLOAD_TOO_LARGE', 'Uploaded file is larger than the limit', 413)

/**
 * `xml(data)`: a key of `data` is not an XML 1.0 Name (or declares a namespace, or names a
 * processing instruction), so writing it would break or inject markup. 400: such keys
 * usually come from client input echoed back.
 */
export const XmlNameError = createError<[string]>('FST_CONTEXT_INVALID_XML_NAME', 'Cannot write XML: %s', 400)

/**
 * Errors of the request-side context API. Request errors carry the 4xx a handler can let
 * through to the error handler as is; configuration errors (the plugin used in a way it cannot
 * serve) are 500s with a message that says what to register or enable.
 */
import createError from '@fastify/error'

/** `paramsInt(key)`: the parameter is present but not a decimal integer. */
export const ParamNotIntegerError = createError<[string, string]>(
  'FST_CONTEXT_PARAM_NOT_INTEGER', 'Route parameter "%s" must be an integer, got "%s"', 400)

/** `range(size)`: no range of the header overlaps the resource (answer 416). */
export const RangeNotSatisfiableError = createError(
  'FST_CONTEXT_RANGE_NOT_SATISFIABLE', 'Range not satisfiable', 416)

/** `range(size)`: the Range header is absent or not `unit=ranges` (RFC 9110: ignore it, send 200). */
export const RangeMalformedError = createError<[string]>(
  'FST_CONTEXT_RANGE_MALFORMED', 'Malformed Range header: %s', 400)

/** `range(size)`: the size given by the handler is not a whole number >= 0. */
export const RangeSizeError = createError<[string]>(
  'FST_CONTEXT_RANGE_SIZE', 'range(size): size must be a whole number >= 0, got %s', 500, TypeError)

/** A binder (`paramsParser`, `queryParser`, ...) found values that do not fit the schema. */
export const BindError = createError<[string, string]>(
  'FST_CONTEXT_BIND_FAILED', 'Invalid %s: %s', 400)

/** `bodyParser(schema)`: the Content-Type is none of JSON, XML, urlencoded or multipart form. */
export const UnsupportedBodyTypeError = createError<[string]>(
  'FST_CONTEXT_UNSUPPORTED_BODY_TYPE', 'Unsupported body type for binding: %s', 415)

/** `bodyParser(schema)`: an XML body that fast-xml-parser rejects. */
export const MalformedXmlError = createError<[string]>(
  'FST_CONTEXT_MALFORMED_XML', 'Malformed XML body: %s', 400)

/** The body names a Content-Encoding the plugin cannot decode. */
export const UnsupportedContentEncodingError = createError<[string]>(
  'FST_CONTEXT_UNSUPPORTED_CONTENT_ENCODING', 'Unsupported Content-Encoding: %s', 415)

/** The compressed body is corrupt. */
export const CorruptBodyError = createError<[string]>(
  'FST_CONTEXT_CORRUPT_BODY', 'Cannot decode the %s request body', 400)

/** The decompressed body grows past the body limit (a decompression bomb or just too big). */
export const DecodedBodyTooLargeError = createError<[number]>(
  'FST_CONTEXT_DECODED_BODY_TOO_LARGE', 'The decoded request body exceeds %d bytes', 413)

/** `bodyRaw()` / `body()` when the plugin keeps no copy of the body (option `rawBody: false`, or multipart). */
export const RawBodyUnavailableError = createError<[string]>(
  'FST_CONTEXT_RAW_BODY_UNAVAILABLE', 'The raw request body is not available: %s', 500)

/** A form operation on a form body that no registered plugin parsed. */
export const FormNotParsedError = createError<[string]>(
  'FST_CONTEXT_FORM_NOT_PARSED', 'The form body was not parsed: %s', 500)

/** The request handed to `setParserDecoder` or the plugin options is not a valid parser configuration. */
export const ParserDecoderConfigError = createError<[string]>(
  'FST_CONTEXT_PARSER_DECODER_CONFIG', 'Invalid parser decoder configuration: %s', 500, TypeError)

/** `context()` signal: the client went away before the response was sent. */
export const ClientGoneError = createError(
  'FST_CONTEXT_CLIENT_GONE', 'The client closed the connection before the response was sent', 499)

/** `multipartForm()` / `formFile()` on a request that is not multipart/form-data. */
export const NotMultipartError = createError(
  'FST_CONTEXT_NOT_MULTIPART', 'The request is not multipart/form-data', 415)

/** `formFile(key)`: no file was uploaded under that key. */
export const FormFileMissingError = createError<[string]>(
  'FST_CONTEXT_FORM_FILE_MISSING', 'No file uploaded under "%s"', 400)

/** A multipart body larger than the route's bodyLimit (the whole body, every part counted). */
export const MultipartTooLargeError = createError<[string]>(
  'FST_CONTEXT_MULTIPART_TOO_LARGE', 'The multipart body is too large: %s', 413)

/** A multipart body that busboy cannot parse: truncated, no boundary, a malformed part header. */
export const MalformedMultipartError = createError<[string]>(
  'FST_CONTEXT_MALFORMED_MULTIPART', 'Malformed multipart body: %s', 400)

/** A request decorator used before the plugin's onRequest hook ran (e.g. from another plugin's earlier onRequest hook). */
export const ContextNotReadyError = createError(
  'FST_CONTEXT_NOT_READY', 'The context request decorators are used before the context plugin\'s onRequest hook ran', 500)

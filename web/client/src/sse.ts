// A parser of the text/event-stream format (Server-Sent Events), as the WHATWG HTML standard
// defines its interpretation ("9.2.6 Interpreting an event stream"), for a client that reads
// the stream with fetch: EventSource sends no Authorization header, which native apps need.

/** One dispatched event of a stream. */
export interface SseEvent {
  /** The `event:` field, "message" when the event had none. */
  event: string;
  /** The `data:` lines joined with "\n". */
  data: string;
  /**
   * The last event ID: the latest `id:` field seen so far in the stream, this event's or an
   * earlier one's (the standard keeps it across events); "" when none.
   */
  id: string;
}

/**
 * Reads a stream given in pieces cut anywhere, through a line or a CRLF pair: push each decoded
 * piece, take the events completed so far. Lines end with CRLF, LF or CR; a leading BOM is
 * dropped; comments (`:`) and unknown fields are ignored; an event not ended by an empty line
 * when the stream ends is dropped, as the standard says. Not safe for concurrent use (one
 * parser per connection).
 */
export class SseParser {
  /**
   * The last event ID: the `id:` of the latest event ended (by its empty line), "" until one is;
   * kept across events and connections. An `id:` of an event cut off by the stream's end does
   * not count: send this as `Last-Event-ID` when reconnecting.
   */
  lastEventId = "";
  /** The latest valid `retry:` value in milliseconds, undefined until one is seen. */
  retryMs: number | undefined;
  /** Comment lines seen (heartbeats), for a caller that wants to know the stream is alive. */
  comments = 0;

  private buf = "";
  private started = false;
  /** The previous piece ended with CR: a LF at the start of the next one ends no new line. */
  private afterCR = false;
  private idBuffer = "";
  private data: string[] = [];
  private eventType = "";

  /** Parses a piece of the stream and returns the events it completed, in order. */
  push(chunk: string): SseEvent[] {
    // Nothing (a decoder holding half a character): a CR at the end of the last piece must still
    // meet the next piece's LF.
    if (chunk === "") return [];
    if (!this.started && chunk.length > 0) {
      this.started = true;
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
    }
    if (this.afterCR && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.afterCR = false;
    const out: SseEvent[] = [];
    let text = this.buf + chunk;
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      this.line(text.slice(start, i), out);
      if (c === 0x0d) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 0x0a) i++;
        } else {
          this.afterCR = true; // its LF, if any, comes with the next piece
        }
      }
      start = i + 1;
    }
    this.buf = text.slice(start);
    text = "";
    return out;
  }

  /** Drops what an ended stream left unfinished, ready for a new connection's stream. */
  reset(): void {
    this.buf = "";
    this.started = false;
    this.afterCR = false;
    this.data = [];
    this.eventType = "";
    this.idBuffer = this.lastEventId;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === "") {
      // Dispatch: the id counts even for an event with no data line, which is not dispatched
      // (its type is still reset).
      this.lastEventId = this.idBuffer;
      if (this.data.length > 0) {
        out.push({ event: this.eventType || "message", data: this.data.join("\n"), id: this.lastEventId });
      }
      this.data = [];
      this.eventType = "";
      return;
    }
    if (line.startsWith(":")) {
      this.comments++;
      return;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.eventType = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.idBuffer = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        // An unknown field is ignored.
        break;
    }
  }
}

/**
 * Branded unit types. Token counts, block counts, bytes and milliseconds are all plain numbers at
 * run time; the brands make the compiler refuse to pass one where another is expected, so a block
 * count can never silently become a token count at a package boundary.
 */
declare const unit: unique symbol;
type Branded<T, U extends string> = T & { readonly [unit]: U };

export type Tokens = Branded<number, "tokens">;
export type Blocks = Branded<number, "blocks">;
export type Bytes = Branded<number, "bytes">;
export type Millis = Branded<number, "ms">;

export const tokens = (n: number): Tokens => n as Tokens;
export const blocks = (n: number): Blocks => n as Blocks;
export const bytes = (n: number): Bytes => n as Bytes;
export const millis = (n: number): Millis => n as Millis;

/** The largest integer a double holds exactly; byte counts must stay at or below it. */
export const MAX_SAFE_BYTES = 2 ** 53;

/**
 * A memo keyed by block size. Nearly every prompt and sequence is hashed at one block size only,
 * so the first entry lives in two fields and a Map is made only for a second size: per request,
 * one small object instead of a Map and its hash table (which outlive young-generation
 * collections with the request).
 */
export class BySize<T> {
  private size = 0;
  private value: T | undefined;
  private others: Map<number, T> | undefined;

  get(size: number): T | undefined {
    if (size === this.size) return this.value;
    return this.others?.get(size);
  }

  /** Sets the entry of a size that has none (a memo's entries are never replaced). */
  set(size: number, value: T): void {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: KP-70
    if (this.value === undefined) {
      this.size = size;
      this.value = value;
    } else (this.others ??= new Map()).set(size, value);
  }
}
